"""The Rust scanner against Python's `regex` with the GPT-2 pattern: differential fuzzing, plus an
exhaustive pass over every code point.

The scanner's tables follow one Unicode version and the installed `regex` may follow a newer (or older)
one, so both are compared on the characters assigned in both versions, or in neither
(`conftest.newly_assigned`): any difference there fails, naming the command that regenerates the
tables.
"""

from __future__ import annotations

import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bytepair
from bytepair import _core
from conftest import REGENERATE, newly_assigned, stable_characters, tables_unicode

regex = pytest.importorskip("regex")
PATTERN = regex.compile(bytepair.GPT2_PATTERN)

# Characters that exercise every branch: all of White_Space and its look-alikes (U+001C-001F are
# str.isspace() but not \s), letters of several scripts, numbers of several kinds, combining marks,
# emoji with joiners, apostrophes and the contraction letters in both cases.
WHITESPACE = "\t\n\x0b\x0c\r \x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2005\u200a\u2028\u2029\u202f\u205f\u3000"
SCRIPTS = "aZsdmtlvreSDMTLVRE'’ éßñøÆ日本語中文한국어ةعربيहिन्दीΑβγЖж"
NUMBERS = "0123456789٣٤²³½Ⅻⅷ①𝟘"
OTHER = '!?.,;:-_()[]{}<>/\\|@#$%^&*+=~`"\u0301\u0300\u200d\ufe0f🙂👍🏽👨‍👩‍👧\x00\x7f\ufffd'
ALPHABET = WHITESPACE + SCRIPTS + NUMBERS + OTHER

pieces_strategy = st.text(alphabet=ALPHABET, max_size=60)
any_text = st.text(stable_characters(), max_size=60)
# Short runs of the same kind, so that runs, space-led runs and whitespace look-ahead all occur often.
runs = st.lists(
    st.sampled_from([" ", "  ", "\n", " \n ", "'s", "'LL", "word", " word", "12", " 3", "!!", "日本"])
)

# Long texts, mostly ASCII: the scanner reads 64 bytes of ASCII at a time where it can, so these
# exercise its window path, with every rule landing at every offset of a window.
long_runs = st.lists(
    st.sampled_from(
        ["a", "word", "'", "'s", "'ll", "'ve", "'re", "'l", "'S", "s", "e", " ", "  ", "\t", "\n", "\r\n"]
        + ["0", "42", "!", "?.", "{", "_", "é", "ü", "×", "÷", "ʰ", "日本", "\u3000", "\xa0", "x" * 70]
    ),
    min_size=20,
    max_size=300,
)


def assert_same(text: str) -> None:
    expected = PATTERN.findall(text)
    assert bytepair.pretokenize(text) == expected, f"{text!r}; {differ()}"


def differ() -> str:
    return (
        f"bytepair's tables (Unicode {_core.UNICODE_VERSION}) and regex {regex.__version__} class a "
        f"character assigned in both versions differently; regenerate the tables: {REGENERATE}"
    )


@settings(max_examples=3000, deadline=None)
@given(pieces_strategy)
def test_matches_regex_on_mixed_scripts(text: str) -> None:
    assert_same(text)


@settings(max_examples=2000, deadline=None)
@given(any_text)
def test_matches_regex_on_any_text(text: str) -> None:
    assert_same(text)


@settings(max_examples=1000, deadline=None)
@given(runs)
def test_matches_regex_on_token_runs(parts: list[str]) -> None:
    assert_same("".join(parts))


@settings(max_examples=1500, deadline=None)
@given(long_runs)
def test_matches_regex_on_long_mostly_ascii_text(parts: list[str]) -> None:
    assert_same("".join(parts))


@pytest.mark.parametrize(
    ("text", "pieces"),
    [
        ("a   b", ["a", "  ", " b"]),
        ("a\n\nb", ["a", "\n", "\n", "b"]),
        ("a \n b", ["a", " \n", " b"]),
        ("a \u00a0b", ["a", " ", "\u00a0", "b"]),
        ("x   ", ["x", "   "]),
        ("it's I'LL", ["it", "'s", " I", "'", "LL"]),
        ("", []),
    ],
)
def test_documented_cases(text: str, pieces: list[str]) -> None:
    assert bytepair.pretokenize(text) == pieces
    assert PATTERN.findall(text) == pieces


def test_tables_follow_the_unicode_version_of_the_fixture() -> None:
    version, _ = tables_unicode()
    assert _core.UNICODE_VERSION == version, (
        f"the engine's tables follow Unicode {_core.UNICODE_VERSION}, tests/fixtures/unicode_assigned.txt "
        f"Unicode {version}: {REGENERATE}"
    )


def test_every_code_point_is_classified_like_regex() -> None:
    new = newly_assigned()
    if new:
        warnings.warn(
            f"regex {regex.__version__} follows another Unicode version than bytepair's tables "
            f"(Unicode {_core.UNICODE_VERSION}): {len(new)} code points assigned in only one of them are "
            f"not compared. To follow it: {REGENERATE}",
            stacklevel=1,
        )
    # Each code point in contexts that reveal its class: after a letter, doubled, after a space, before
    # a digit and before a space at the end of a run.
    chars = (chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF and chr(cp) not in new)
    text = "".join(f"x{c}{c} {c}1{c} 'a" for c in chars)
    got = bytepair.pretokenize(text)
    expected = PATTERN.findall(text)
    if got != expected:
        first = next(i for i, (a, b) in enumerate(zip(got, expected)) if a != b)
        pytest.fail(f"first difference at piece {first}: {got[first]!r} != {expected[first]!r}; {differ()}")


def test_lone_surrogates_are_rejected() -> None:
    with pytest.raises(UnicodeEncodeError):
        bytepair.pretokenize("a\ud800b")
