"""``bytepair report``: one self-contained HTML page comparing tokenizers on corpora.

The page shows the numbers of :mod:`bytepair.stats` for one tokenizer, or two side by side (say one
trained on prose and one on code, each encoding the other's corpus): bytes per token on each corpus, the
share of the vocabulary each corpus uses, token lengths, the longest tokens. Charts are inline SVG and
the styles inline CSS, so the file opens anywhere and fetches or runs nothing.

``CorpusResult``, ``describe_token``, ``length_histogram``, ``longest_tokens`` and ``measure`` live in
:mod:`bytepair.stats` and are importable from here as before.
"""

from __future__ import annotations

import html
import math
import os
from collections.abc import Callable, Mapping, Sequence

from ._common import PathLike, check_num_threads, path_str, write_atomically
from .stats import (
    CorpusResult,
    describe_token,
    length_histogram,
    longest_tokens,
    measure,
    percent_more,
    vocab_overlap,
    vocab_stats,
)
from .tokenizer import Tokenizer

__all__ = ["CorpusResult", "describe_token", "length_histogram", "longest_tokens", "measure", "write_report"]

COLORS = ["#2f6db5", "#e07b39"]  # one per tokenizer
_HISTOGRAM_CAP = 32  # longer tokens share the last bar


def _esc(value: object) -> str:
    return html.escape(str(value))


def _legend(series: Sequence[str]) -> str:
    items = "".join(
        f'<span class="key"><i style="background:{COLORS[k]}"></i>{_esc(name)}</span>'
        for k, name in enumerate(series)
    )
    return f'<div class="legend">{items}</div>'


def _bar_chart(rows: Sequence[tuple[str, Sequence[float]]], fmt: Callable[[float], str]) -> str:
    """Horizontal bars: one group per row label, one bar per series, values printed at the bar ends."""
    label_width, bar_width, bar_height, gap = 200, 560, 22, 14
    series = max(len(values) for _, values in rows)
    top = max(max(values) for _, values in rows) or 1.0
    group = series * bar_height + gap
    height = len(rows) * group + gap
    parts = [f'<svg width="{label_width + bar_width + 90}" height="{height}" role="img">']
    for r, (label, values) in enumerate(rows):
        y0 = gap + r * group
        middle = y0 + series * bar_height / 2 + 5
        parts.append(f'<text x="{label_width - 10}" y="{middle}" text-anchor="end">{_esc(label)}</text>')
        for k, value in enumerate(values):
            y = y0 + k * bar_height
            w = max(bar_width * value / top, 1)
            parts.append(
                f'<rect x="{label_width}" y="{y}" width="{w:.1f}" height="{bar_height - 4}" '
                f'fill="{COLORS[k]}"/><text x="{label_width + w + 6:.1f}" y="{y + bar_height - 9}" '
                f'class="value">{_esc(fmt(value))}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def _round_step(at_least: float) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50, ... that is at least ``at_least``: gridlines at round numbers.

    >>> _round_step(0.3), _round_step(544), _round_step(2001)
    (1, 1000, 5000)
    """
    magnitude = 10 ** max(0, math.floor(math.log10(max(at_least, 1))))
    return next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= at_least)


def _histogram_chart(histograms: Sequence[Mapping[int, int]]) -> str:
    """Vertical bars of token counts by length (histograms capped at ``_HISTOGRAM_CAP``), series side
    by side."""
    capped = [list(hist.values()) for hist in histograms]
    left, bottom, plot_w, plot_h = 60, 40, 960, 260
    step = _round_step(max(max(b) for b in capped) / 5)
    ticks = math.ceil(max(max(b) for b in capped) / step) or 1
    top = step * ticks
    slot = plot_w / _HISTOGRAM_CAP
    bar = (slot - 4) / len(capped)
    parts = [f'<svg width="{left + plot_w + 20}" height="{plot_h + bottom + 20}" role="img">']
    for k in range(ticks + 1):
        value = step * k
        y = 10 + plot_h - plot_h * k / ticks
        parts.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
            f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end" class="value">{value:,.0f}</text>'
        )
    for length in range(1, _HISTOGRAM_CAP + 1):
        x0 = left + (length - 1) * slot + 2
        for k, bins in enumerate(capped):
            h = plot_h * bins[length - 1] / top
            parts.append(
                f'<rect x="{x0 + k * bar:.1f}" y="{10 + plot_h - h:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                f'fill="{COLORS[k]}"><title>{length} bytes: {bins[length - 1]:,}</title></rect>'
            )
        label = f"{length}+" if length == _HISTOGRAM_CAP else str(length)
        parts.append(
            f'<text x="{x0 + slot / 2 - 2:.1f}" y="{plot_h + 28}" text-anchor="middle" '
            f'class="value">{label}</text>'
        )
    parts.append(
        f'<text x="{left + plot_w / 2}" y="{plot_h + bottom + 14}" '
        'text-anchor="middle">token length in bytes</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _token_list(tokens: Sequence[bytes]) -> str:
    # Spaces made visible: a leading space is what tells " the" from "the".
    shown = [describe_token(t, quote=False).replace(" ", "␣") for t in tokens]
    items = "".join(f"<li><code>{_esc(s)}</code> <span>{len(t)}</span></li>" for s, t in zip(shown, tokens))
    return f'<ol class="tokens">{items}</ol>'


_STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d2330; margin: 0;
       background: #f4f6fa; }
main { max-width: 1080px; margin: 0 auto; padding: 28px 32px 48px; }
h1 { font-size: 28px; margin: 0 0 4px; } h2 { font-size: 20px; margin: 0 0 6px; }
p.lead, p.note { color: #566; margin: 4px 0 14px; }
section { background: #fff; border-radius: 10px; padding: 20px 24px; margin: 18px 0;
          box-shadow: 0 1px 3px rgba(20, 30, 60, .12); }
table { border-collapse: collapse; margin-top: 10px; }
th, td { padding: 5px 14px 5px 0; text-align: left; border-bottom: 1px solid #e4e8ef; }
td:not(:first-child), th:not(:first-child) { text-align: right; }
svg text { font: 13px system-ui, sans-serif; fill: #1d2330; } svg text.value { fill: #566; font-size: 12px; }
svg line.grid { stroke: #e4e8ef; }
.legend { margin: 6px 0; } .key { margin-right: 18px; }
.key i { display: inline-block; width: 12px; height: 12px; border-radius: 2px; margin-right: 6px; }
.columns { display: flex; gap: 32px; flex-wrap: wrap; } .columns > div { flex: 1; min-width: 300px; }
ol.tokens { margin: 6px 0; padding-left: 30px; }
ol.tokens li { margin: 3px 0; }
ol.tokens code { background: #eef2f8; padding: 1px 5px; border-radius: 4px; white-space: pre-wrap;
                 word-break: break-all; }
ol.tokens span { color: #8a94a6; font-size: 12px; margin-left: 6px; }
"""


def _comparison(names: Sequence[str], toks: Sequence[Tokenizer], results: Sequence[CorpusResult]) -> str:
    rows = [
        [ra.corpus, f"{ra.tokens:,}", f"{rb.tokens:,}", f"{percent_more(rb.tokens, ra.tokens):+.1f}%"]
        for ra, rb in zip(results[0::2], results[1::2])
    ]
    overlap = vocab_overlap(toks[0], toks[1], 16)
    return (
        "<section><h2>Side by side</h2><p class='note'>Tokens each needs on every corpus; the last column "
        f"is how many more (or fewer) {_esc(names[1])} needs than {_esc(names[0])}. The two vocabularies "
        f"share {overlap.shared:,} tokens.</p>"
        + _table(["corpus", names[0], names[1], f"{names[1]} vs {names[0]}"], rows)
        + "<div class='columns'>"
        + "".join(
            f"<div><h2>Longest tokens only {_esc(n)} has</h2>{_token_list(t)}</div>"
            for n, t in zip(names, (overlap.only_first, overlap.only_second))
        )
        + "</div></section>"
    )


def _render_html(tokenizers: Mapping[str, Tokenizer], results: Sequence[CorpusResult]) -> str:
    """The report page for ``results``, which hold every tokenizer on each corpus, corpus by corpus."""
    names, toks = list(tokenizers), list(tokenizers.values())
    by_corpus: dict[str, list[CorpusResult]] = {}
    for r in results:
        by_corpus.setdefault(r.corpus, []).append(r)
    summary = []
    for name, tok in tokenizers.items():
        stats = vocab_stats(tok.vocab, tok.special_tokens)
        specials = ", ".join(tok.special_tokens) or "none"
        mean = f"{stats.mean_length:.2f}"
        summary.append([name, f"{len(tok.vocab):,}", f"{len(tok.merges):,}", specials, mean, stats.longest])
    compression_rows = [
        [corpus, f"{rs[0].bytes / 1e6:,.2f} MB"] + [f"{r.tokens:,} ({r.bytes_per_token:.2f})" for r in rs]
        for corpus, rs in by_corpus.items()
    ]
    sections = [
        "<section><h2>Tokenizers</h2>"
        + _table(["tokenizer", "vocab", "merges", "special tokens", "mean length", "longest"], summary)
        + "</section>",
        "<section><h2>Compression: bytes per token</h2><p class='note'>UTF-8 bytes of each corpus divided by "
        "the tokens it encodes to; higher means shorter sequences.</p>"
        + _legend(names)
        + _bar_chart(
            [(c, [r.bytes_per_token for r in rs]) for c, rs in by_corpus.items()], lambda v: f"{v:.2f}"
        )
        + _table(["corpus", "size"] + [f"{n}: tokens (bytes/token)" for n in names], compression_rows)
        + "</section>",
        "<section><h2>Share of the vocabulary each corpus uses</h2><p class='note'>Distinct token ids that "
        "appear in the encoded corpus, over the vocabulary size.</p>"
        + _legend(names)
        + _bar_chart(
            [(c, [100 * r.vocab_share for r in rs]) for c, rs in by_corpus.items()], lambda v: f"{v:.1f}%"
        )
        + "</section>",
        "<section><h2>Token lengths</h2><p class='note'>Tokens of each length in bytes (special tokens "
        "aside).</p>"
        + _legend(names)
        + _histogram_chart([length_histogram(t.vocab, t.special_tokens, _HISTOGRAM_CAP) for t in toks])
        + "</section>",
        "<section><div class='columns'>"
        + "".join(
            f"<div><h2>Longest tokens of {_esc(n)}</h2>"
            f"{_token_list(longest_tokens(t.vocab, t.special_tokens, 16))}</div>"
            for n, t in tokenizers.items()
        )
        + "</div></section>",
    ]
    if len(toks) == 2:
        sections.append(_comparison(names, toks, results))
    title = "Tokenizer report: " + " vs ".join(names)
    return (
        f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>{_esc(title)}</title>"
        f"<style>{_STYLE}</style></head><body><main><h1>{_esc(title)}</h1><p class='lead'>Corpora: "
        f"{_esc(', '.join(by_corpus))}. Made by bytepair.</p>{''.join(sections)}</main></body></html>\n"
    )


def write_report(
    tokenizers: Mapping[str, Tokenizer],
    corpora: Sequence[str],
    output: PathLike,
    num_threads: int | None = None,
    progress: bool | Callable[[str, int, int], None] = False,
) -> list[CorpusResult]:
    """Encodes every corpus with every tokenizer (at most two, named by the keys) and writes the HTML
    report to ``output``; returns the measurements, corpus by corpus.

    ``output`` is written as :meth:`Tokenizer.save` writes files: whole or not at all, a device such as
    ``/dev/stdout`` directly. An output that is one of the corpora raises ValueError before any work.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> _ = open(os.path.join(d, "c.txt"), "w").write("the cat")
    >>> tok = Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"th"}, [(b"t", b"h")])
    >>> write_report({"tok": tok}, [os.path.join(d, "c.txt")], os.path.join(d, "report.html"))
    [CorpusResult(tokenizer='tok', corpus='c.txt', bytes=7, tokens=6, ids_used=6, vocab_size=257)]
    >>> "<svg" in open(os.path.join(d, "report.html"), encoding="utf-8").read()
    True
    """
    output = path_str(output, "output")
    num_threads = check_num_threads(num_threads)
    for corpus in corpora:
        try:
            same = os.path.samefile(output, corpus)
        except OSError:  # either does not exist: a missing corpus is reported when it is read
            continue
        if same:
            raise ValueError(
                f"{output}: the output is the corpus {corpus}; writing it would destroy the corpus"
            )
    names = [os.path.basename(c) for c in corpora]
    labels = names if len(set(names)) == len(names) else list(corpora)  # the paths tell a/x.txt from b/x.txt
    results = [
        measure(name, tok, corpus, num_threads, progress, label)
        for corpus, label in zip(corpora, labels)
        for name, tok in tokenizers.items()
    ]
    write_atomically(output, _render_html(tokenizers, results))
    return results
