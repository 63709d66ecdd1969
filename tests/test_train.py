"""Training: exact agreement with the CS336 reference files and the pure-Python reference, determinism
across threads and chunk sizes, and what each bad input gets."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bytepair
from bytepair import reference
from conftest import CS336, MEMORY_PROBE

pytest.importorskip("regex")
EOT = "<|endoftext|>"


def gpt2_decode(text: str) -> bytes:
    table = {c: b for b, c in bytepair.bytes_to_unicode().items()}
    return bytes(table[c] for c in text)


def write(tmp_path: Path, content: str | bytes, name: str = "input.txt") -> Path:
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def test_matches_cs336_reference_files(cs336: Path) -> None:
    vocab, merges = bytepair.train_bpe(cs336 / "corpus.en", 500, [EOT])
    lines = (cs336 / "train-bpe-reference-merges.txt").read_text(encoding="utf-8").splitlines()
    expected_merges = [tuple(gpt2_decode(t) for t in line.split(" ")) for line in lines if line]
    assert merges == expected_merges
    expected_vocab = json.loads((cs336 / "train-bpe-reference-vocab.json").read_text(encoding="utf-8"))
    assert set(vocab.keys()) == set(expected_vocab.values())
    assert set(vocab.values()) == {gpt2_decode(t) for t in expected_vocab}
    # Merge 31 (from 0) is where comparing concatenations instead of tuples (gigatoken) goes wrong: the
    # two pairs tie, and b" a" > b" " although b" and" < b" d".
    assert merges[31:33] == [(b" a", b"nd"), (b" ", b"d")]


def test_id_layout_is_bytes_then_merges_then_specials(tmp_path: Path) -> None:
    path = write(tmp_path, "the cat<|endoftext|>the hat<|x|>")
    vocab, merges = bytepair.train_bpe(path, 262, [EOT, "<|x|>"])
    assert list(vocab) == list(range(262))
    assert [vocab[i] for i in range(256)] == [bytes([i]) for i in range(256)]
    assert [vocab[256 + i] for i in range(len(merges))] == [a + b for a, b in merges]
    assert vocab[260] == EOT.encode() and vocab[261] == b"<|x|>"


# Special tokens that overlap, each shorter one listed first: where several match at one place,
# leftmost-longest matching (the reference's) takes the longest, leftmost-first would take the one listed
# first and leave the rest of the longer as text ("<|ab|>" as "<|a" and "b|>").
SPECIALS = [EOT, "<|a", "<|a|>", "<|ab|>", "<|a|><|a|>"]
# Text from a small alphabet so that pairs repeat and ties are frequent; special tokens and their parts
# inside.
texts = st.lists(
    st.one_of(
        st.text(alphabet="ab c\n'sé1 日", min_size=1, max_size=12),
        st.sampled_from([*SPECIALS, "b|>", "|>"]),
    ),
    max_size=40,
).map("".join)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=texts, extra=st.integers(0, 40))
def test_equals_pure_python_reference(tmp_path: Path, text: str, extra: int) -> None:
    path = write(tmp_path, text)
    specials = SPECIALS
    vocab_size = 256 + len(specials) + extra
    assert bytepair.train_bpe(path, vocab_size, specials, _chunk_size=7) == reference.train_bpe(
        str(path), vocab_size, specials
    )


@pytest.mark.parametrize("name", ["tinystories_sample.txt", "german.txt", "address.txt"])
def test_equals_reference_on_real_text(name: str) -> None:
    path = CS336 / name
    assert bytepair.train_bpe(path, 400, [EOT]) == reference.train_bpe(str(path), 400, [EOT])


def test_same_result_for_any_threads_and_chunk_size(cs336: Path) -> None:
    expected = bytepair.train_bpe(cs336 / "corpus.en", 600, [EOT], num_threads=1)
    for threads in (1, 2, 8):
        for chunk in (1, 1000, 1 << 16, None):
            got = bytepair.train_bpe(cs336 / "corpus.en", 600, [EOT], num_threads=threads, _chunk_size=chunk)
            assert got == expected, (threads, chunk)


def test_stats_count_distinct_pretokens(tmp_path: Path) -> None:
    path = tmp_path / "c.txt"
    path.write_text("low low lower<|endoftext|>low! 12 12")
    stats: dict = {}
    bytepair.train_bpe(path, 260, ["<|endoftext|>"], stats=stats)
    # "low", " low", " lower", "low" again (after the special token), "!", " 12" twice.
    assert stats["distinct_pretokens"] == 5


def test_stops_early_without_error_when_no_pair_is_left(tmp_path: Path) -> None:
    vocab, merges = bytepair.train_bpe(write(tmp_path, "ab ab"), 10_000, [EOT])
    assert merges == [(b"a", b"b"), (b" ", b"ab")]
    assert len(vocab) == 259 and vocab[258] == EOT.encode()


@pytest.mark.parametrize("vocab_size", [10**12, 2**70])
def test_huge_vocab_size_just_trains_until_no_pair_is_left(tmp_path: Path, vocab_size: int) -> None:
    vocab, merges = bytepair.train_bpe(write(tmp_path, "ab ab"), vocab_size)
    assert merges == [(b"a", b"b"), (b" ", b"ab")] and len(vocab) == 258


def test_empty_file_gives_bytes_and_specials(tmp_path: Path) -> None:
    vocab, merges = bytepair.train_bpe(write(tmp_path, ""), 300, [EOT])
    assert merges == [] and len(vocab) == 257 and vocab[256] == EOT.encode()


def test_special_tokens_are_never_merged_and_longest_wins(tmp_path: Path) -> None:
    # Where "<|ab|>" stands, "<|a" matches too: the longest wins and removes it whole, so only "ab" is
    # left to count. Had "<|a" (listed first) won, "b|>" would be text and "|>" a merge.
    text = "ab<|ab|>ab<|ab|><|ab|>ab<|a ab\n" * 3
    specials = ["<|a", "<|ab|>"]
    vocab, merges = bytepair.train_bpe(write(tmp_path, text), 300, specials)
    assert merges == [(b"a", b"b"), (b" ", b"ab")]
    assert len(vocab) == 260 and vocab[258] == b"<|a" and vocab[259] == b"<|ab|>"
    assert reference.train_bpe(str(tmp_path / "input.txt"), 300, specials) == (vocab, merges)


def test_duplicate_special_tokens_are_added_once(tmp_path: Path) -> None:
    vocab, _ = bytepair.train_bpe(write(tmp_path, "x"), 300, [EOT, EOT, "<|x|>", EOT])
    assert list(vocab.values()).count(EOT.encode()) == 1
    assert len(vocab) == 258


def test_progress_callback_sees_both_phases(cs336: Path) -> None:
    seen: list[tuple[str, int, int]] = []
    bytepair.train_bpe(cs336 / "corpus.en", 500, [EOT], progress=lambda *a: seen.append(a))
    size = (cs336 / "corpus.en").stat().st_size
    assert ("count", size, size) in seen
    assert ("merge", 243, 243) in seen


def test_error_in_progress_callback_stops_training(cs336: Path) -> None:
    def fail(phase: str, done: int, total: int) -> None:
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        bytepair.train_bpe(cs336 / "corpus.en", 500, [EOT], progress=fail)


# Bad input: each gets a clear exception, and nothing is written.


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as e:
        bytepair.train_bpe(tmp_path / "nope.txt", 300)
    assert e.value.filename == str(tmp_path / "nope.txt")


def test_directory(tmp_path: Path) -> None:
    # A directory is a source: its files (issue 14); one with none is an error.
    with pytest.raises(ValueError, match="the directory holds no files"):
        bytepair.train_bpe(tmp_path, 300)
    (tmp_path / "a.txt").write_text("low lower")
    (tmp_path / "b.txt").write_text("lowest")
    assert bytepair.train_bpe(tmp_path, 300) == bytepair.train_bpe(
        [tmp_path / "a.txt", tmp_path / "b.txt"], 300
    )


def test_invalid_utf8_names_the_offset(tmp_path: Path) -> None:
    data = ("hello world " * 1000).encode() + b"\xff\xfe" + b" more text" * 100
    path = write(tmp_path, data)
    for chunk in (16, None):
        with pytest.raises(ValueError, match=r"invalid UTF-8 at byte offset 12000\b"):
            bytepair.train_bpe(path, 300, _chunk_size=chunk)


@pytest.mark.parametrize(("vocab_size", "specials"), [(255, []), (256, [EOT]), (-1, []), (0, [])])
def test_vocab_size_too_small(tmp_path: Path, vocab_size: int, specials: list[str]) -> None:
    with pytest.raises(ValueError, match="too small"):
        bytepair.train_bpe(write(tmp_path, "abc"), vocab_size, specials)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"special_tokens": [""]}, ValueError),
        ({"special_tokens": EOT}, TypeError),
        ({"special_tokens": [b"x"]}, TypeError),
        ({"vocab_size": 300.0}, TypeError),
        ({"num_threads": 0}, ValueError),
    ],
)
def test_bad_arguments(tmp_path: Path, kwargs: dict, error: type) -> None:
    args = {"input_path": write(tmp_path, "abc"), "vocab_size": 300, **kwargs}
    with pytest.raises(error):
        bytepair.train_bpe(**args)


def test_one_long_line_is_chunked_in_bounded_memory(tmp_path: Path) -> None:
    """A 100 MB file with no newline and no special token: counting still cuts it into pieces (at
    spaces), so peak memory stays far below the file size, and the result equals one-thread training."""
    size = 100 << 20
    sentence = "the quick brown fox jumps over the lazy dog, again and again; "
    path = tmp_path / "line.txt"
    with open(path, "w") as f:
        f.write(sentence * (size // len(sentence)))
    script = MEMORY_PROBE + textwrap.dedent(
        f"""
        import bytepair
        reset_peak()
        before = rss_mb("VmRSS")
        parallel = bytepair.train_bpe({str(path)!r}, 300, num_threads=2)
        after = rss_mb()
        print(parallel == bytepair.train_bpe({str(path)!r}, 300, num_threads=1), int(after - before))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=240
    ).stdout
    same, growth_mb = out.split()
    assert same == "True"
    assert int(growth_mb) < 40, f"peak RSS grew by {growth_mb} MB on a 100 MB file"


@pytest.mark.parametrize("suffix", [".txt", ".jsonl"])
def test_peak_memory_is_a_small_multiple_of_the_distinct_pretokens(tmp_path: Path, suffix: str) -> None:
    """Training's peak memory grows with the distinct pre-tokens, at under 120 bytes each here (80 to 95:
    the counts, then the words and their pairs' lists, each compact, the counts freed as the words are
    made), with the token count asked for: from a text file, and from JSON lines (under 160 there), whose
    counts train_bpe makes in Python and hands over. 600,000 distinct words of 6 to 12 letters, once each."""
    script = MEMORY_PROBE + textwrap.dedent(
        f"""
        import json, random
        import bytepair
        rng = random.Random(0)
        words = sorted({{"".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(6, 12)))
                        for _ in range(600_000)}})
        path = {str(tmp_path / ("words" + suffix))!r}
        with open(path, "w") as f:
            for i in range(0, len(words), 1000):
                line = " ".join(words[i : i + 1000])
                f.write(json.dumps({{"text": line}}) + "\\n" if path.endswith(".jsonl") else line + " ")
        del words
        reset_peak()
        before = rss_mb("VmRSS")
        stats = {{}}
        bytepair.train_bpe(path, 1000, ["<|endoftext|>"], stats=stats)
        print(stats["distinct_pretokens"], int((rss_mb() - before) * 2**20))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=240
    ).stdout
    distinct, growth = map(int, out.split())
    assert distinct > 590_000
    # From JSON lines the peak varies with the threads' scheduling: 95 to 147 bytes seen on a loaded 2-core
    # machine, for reasons not yet pinned down; 290 before training's memory was reworked.
    limit = 120 if suffix == ".txt" else 160
    assert growth / distinct < limit, f"peak RSS grew by {growth / distinct:.0f} bytes per distinct pre-token"
