"""The one rule for ``num_threads``, shared by every entry point (train_bpe, encode_batch, encode_file,
the report and the command line)."""

from __future__ import annotations

import operator
from typing import Any

from . import _core


def check_num_threads(num_threads: Any) -> int | None:
    """``num_threads`` as the engine takes it: None (every core) or a positive int, capped at four
    threads per core (more cannot make the work faster, and each costs memory).

    >>> check_num_threads(None), check_num_threads(1)
    (None, 1)
    >>> check_num_threads(10**6) == _core.max_threads()
    True
    >>> check_num_threads(0)
    Traceback (most recent call last):
    ...
    ValueError: num_threads must be a positive int or None, not 0
    """
    if num_threads is None:
        return None
    try:
        n = operator.index(num_threads) if not isinstance(num_threads, bool) else 0
    except TypeError:
        n = 0
    if n < 1:
        raise ValueError(f"num_threads must be a positive int or None, not {num_threads!r}")
    return min(n, _core.max_threads())
