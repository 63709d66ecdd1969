"""Type stubs for the Rust engine (src/py.rs). Use the documented wrappers in bytepair instead."""

from collections.abc import Callable

def pretokenize(text: str) -> list[str]: ...
def train_bpe(
    input_path: str,
    vocab_size: int,
    special_tokens: list[str],
    num_threads: int | None = None,
    chunk_size: int | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> tuple[list[bytes], list[tuple[bytes, bytes]]]: ...
