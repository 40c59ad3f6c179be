"""A pause of the cyclic garbage collector around allocation-heavy work with no reference cycles."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic collection inside the block; reference counting frees as usual, and the collector is back
    on (if it was) when the block ends. For work that makes many acyclic containers (a parsed batch or
    exposition), where the collector would re-scan the growing heap several times for nothing."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
