"""Type stubs for the Rust engine (src/python/). Use the documented wrappers in bytepair instead."""

from collections.abc import Callable

UNICODE_VERSION: str  # of the scanner's character classes (src/pretokenize/unicode_tables.rs)

def pretokenize(text: str) -> list[str]: ...
def max_threads() -> int: ...
def train_bpe(
    input_paths: list[str],
    vocab_size: int,
    special_tokens: list[str],
    num_threads: int | None = None,
    chunk_size: int | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    count_tokens: bool = False,
) -> tuple[list[bytes], list[tuple[bytes, bytes]], tuple[int, int, int | None]]: ...

class Encoder:
    def __init__(
        self, vocab: list[tuple[int, bytes]], merges: list[tuple[bytes, bytes]], special_tokens: list[str]
    ) -> None: ...
    @property
    def vocab_size(self) -> int: ...
    def encode(self, text: str) -> list[int]: ...
    def encode_prefix(self, text: str, last: bool) -> tuple[list[int], str]: ...
    def encode_batch(self, texts: list[str], num_threads: int | None = None) -> list[list[int]]: ...
    def decode_bytes(self, ids: list[int]) -> bytes: ...
    def encode_file(
        self,
        input_path: str,
        output_path: str,
        dtype_bits: int,
        num_threads: int | None = None,
        chunk_size: int | None = None,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> int: ...
