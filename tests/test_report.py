"""The HTML report: the numbers it holds, that it stands alone, and how it looks in a browser."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from bytepair import Tokenizer, report

PROSE = "The quick brown fox jumps over the lazy dog. It's a sunny day, isn't it?\n" * 40
CODE = "def add(x, y):\n    return x + y\n\nfor i in range(10):\n    print(add(i, 2))\n" * 40


def train(tmp_path: Path, name: str, text: str, vocab_size: int) -> Tokenizer:
    import bytepair

    path = tmp_path / f"{name}.txt"
    path.write_text(text, encoding="utf-8")
    return Tokenizer(*bytepair.train_bpe(path, vocab_size, ["<|endoftext|>"]), ["<|endoftext|>"])


@pytest.fixture
def page(tmp_path: Path) -> tuple[Path, list[report.CorpusResult], dict[str, Tokenizer]]:
    """A report of a prose tokenizer and a code tokenizer, each on both corpora."""
    tokenizers = {"prose": train(tmp_path, "prose", PROSE, 300), "code": train(tmp_path, "code", CODE, 300)}
    out = tmp_path / "report.html"
    corpora = [str(tmp_path / "prose.txt"), str(tmp_path / "code.txt")]
    return out, report.write_report(tokenizers, corpora, str(out)), tokenizers


def test_measurements(page: tuple[Path, list[report.CorpusResult], dict[str, Tokenizer]]) -> None:
    _, results, tokenizers = page
    pairs = [(r.tokenizer, r.corpus) for r in results]
    assert pairs == [
        ("prose", "prose.txt"),
        ("code", "prose.txt"),
        ("prose", "code.txt"),
        ("code", "code.txt"),
    ]
    for r in results:
        text = PROSE if r.corpus == "prose.txt" else CODE
        ids = tokenizers[r.tokenizer].encode(text)
        assert (r.bytes, r.tokens, r.ids_used) == (len(text.encode()), len(ids), len(set(ids)))
        assert r.vocab_share == len(set(ids)) / len(tokenizers[r.tokenizer].vocab)
    # Each tokenizer compresses its own corpus best.
    assert results[0].bytes_per_token > results[1].bytes_per_token
    assert results[3].bytes_per_token > results[2].bytes_per_token


def test_page_stands_alone_and_holds_the_numbers(
    page: tuple[Path, list[report.CorpusResult], dict[str, Tokenizer]],
) -> None:
    out, results, _ = page
    html = out.read_text(encoding="utf-8")
    assert "<script" not in html and not re.search(r"""(src|href)=["']?(https?:|//)""", html)
    assert html.count("<svg") == 3
    for r in results:
        assert f"{r.tokens:,} ({r.bytes_per_token:.2f})" in html
        assert f"{100 * r.vocab_share:.1f}%" in html
    assert "Side by side" in html and "Longest tokens only code has" in html


def test_one_tokenizer_and_corpora_of_the_same_name(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "x.txt").write_text(PROSE)
    (tmp_path / "b" / "x.txt").write_text(CODE)
    corpora = [str(tmp_path / "a" / "x.txt"), str(tmp_path / "b" / "x.txt")]
    tok = Tokenizer({i: bytes([i]) for i in range(256)}, [])
    results = report.write_report({"bytes": tok}, corpora, str(tmp_path / "r.html"))
    assert [r.corpus for r in results] == corpora
    assert [r.tokens for r in results] == [len(PROSE), len(CODE)]
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "Tokenizer report: bytes" in html and "Side by side" not in html


def read_png(path: Path) -> tuple[int, int, list[bytes]]:
    """Width, height and the rows of pixels of an 8-bit RGB or RGBA PNG, as Chromium writes them."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, pos = {}, 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        chunks[kind] = chunks.get(kind, b"") + data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    width, height, depth, color = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert depth == 8 and color in (2, 6)
    bpp = 3 if color == 2 else 4
    raw, stride, rows, prev = zlib.decompress(chunks[b"IDAT"]), width * bpp, [], bytes(width * bpp)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a, b = line[i - bpp] if i >= bpp else 0, prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        prev = bytes(line)
        rows.append(prev)
    return width, height, rows


def test_page_renders_in_chromium(
    tmp_path: Path, page: tuple[Path, list[report.CorpusResult], dict[str, Tokenizer]]
) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (.ci/run installs it)")
    shot = tmp_path / "report.png"
    browser = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1200,2000"]
    subprocess.run(
        [*browser, f"--screenshot={shot}", page[0].as_uri()], capture_output=True, timeout=120, check=True
    )
    width, height, rows = read_png(shot)
    assert (width, height) == (1200, 2000)
    pixels = {row[i : i + 3] for row in rows[::4] for i in range(0, len(row), 12)}
    blue, orange = bytes.fromhex(report.COLORS[0][1:]), bytes.fromhex(report.COLORS[1][1:])
    assert len(pixels) > 50  # text, charts and backgrounds, not a blank page
    assert blue in pixels and orange in pixels  # the bars of both tokenizers were drawn
