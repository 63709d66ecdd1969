"""Type stubs for the Rust engine (src/python/). Use the documented wrappers in bytepair instead."""

from collections.abc import Callable, Iterable, Iterator

import numpy

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
def source_kind(path: str) -> tuple[str, str | None]: ...
def parquet_row_groups(path: str) -> list[int]: ...
def encode_dataset(
    encoder: Encoder,
    folder: str,
    jobs: list[tuple[str, object]],
    format: str,
    dtype_bits: int,
    eot: int | None,
    separator: str | None,
    text_field: str,
    skip: bool,
    num_threads: int | None,
    chunk_size: int | None,
    total_bytes: int,
    on_shard: Callable[[tuple[str, int, int, int, int, tuple[tuple[str, int, int], ...]]], None],
    progress: Callable[[str, int, int, int, int], None] | None = None,
) -> tuple[int, int, int, list[str], int]: ...

class PreTokenCounts:
    def __init__(self) -> None: ...
    def update(self, other: PreTokenCounts) -> None: ...
    def __len__(self) -> int: ...
    def __getitem__(self, piece: bytes) -> int: ...
    def total(self) -> int: ...
    @property
    def bytes(self) -> int: ...
    @property
    def documents(self) -> int: ...
    @property
    def skipped(self) -> int: ...
    @property
    def special_occurrences(self) -> int: ...
    @property
    def special_tokens(self) -> list[str] | None: ...
    @property
    def skipped_errors(self) -> list[str]: ...
    def most_common(self, n: int | None = None) -> list[tuple[bytes, int]]: ...
    def _to_bytes(self) -> bytes: ...
    def _load_bytes(self, data: bytes, name: str) -> None: ...
    def _to_transfer(self) -> bytes: ...
    def _add_transfer(self, data: bytes, name: str) -> None: ...
    def _count_files(
        self,
        files: list[tuple[str, str, str | None]],
        special_tokens: list[str],
        text_field: str,
        skip: bool,
        num_threads: int | None = None,
        chunk_size: int | None = None,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> None: ...
    def _count_texts(
        self,
        texts: list[str],
        first: int,
        special_tokens: list[str],
        skip: bool,
        num_threads: int | None = None,
    ) -> None: ...
    def _add_kept(self) -> None: ...
    def _count_row_groups(
        self,
        path: str,
        start: int,
        end: int,
        special_tokens: list[str],
        text_field: str,
        skip: bool,
        num_threads: int | None = None,
    ) -> None: ...
    def _train(
        self,
        vocab_size: int,
        special_tokens: list[str],
        progress: Callable[[str, int, int], None] | None = None,
        count_tokens: bool = False,
        consume: bool = False,
    ) -> tuple[list[bytes], list[tuple[bytes, bytes]], tuple[int, int, int | None]]: ...

class Stream(Iterator[list[int]]):
    def __next__(self) -> list[int]: ...

class Ids:
    """The ids of one call, read in place through the buffer protocol (``numpy.frombuffer``)."""

    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

class Encoder:
    def __init__(
        self, vocab: list[tuple[int, bytes]], merges: list[tuple[bytes, bytes]], special_tokens: list[str]
    ) -> None: ...
    @property
    def vocab_size(self) -> int: ...
    def encode(self, text: str) -> list[int]: ...
    def encode_to_numpy(self, text: str) -> numpy.ndarray: ...
    def stream(self, items: Iterable[str], batch: int) -> Stream: ...
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
