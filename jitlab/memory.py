"""Freed memory handed back to the system, so a long run's process stays the size of what it holds.

glibc keeps freed heap memory for reuse, and after the first large block is freed it raises its mmap threshold (up to
32 MiB), so later arrays of up to that size come from the heap too. The engines allocate many such arrays per call
(keys/values, logits) and free them in another order, and the heap only grows: a 121-task mixed streaming JIT's process
held 10.4 GB of which 4.2 GB was free heap (measured with ``malloc_trim`` from a debugger; docs/measurements.md,
"Memory along a stream"). Two remedies, both no-ops off glibc:

- ``steady_heap()``: a fixed mmap threshold of 1 MiB (``mallopt``), so every block of 1 MiB or more is its own mapping,
  returned to the system when freed; called once per process by the engines before their first call.
- ``trim()``: ``malloc_trim(0)``, the heap's free pages handed back; called after each episode.

``benchmarks/engine_memory.py`` measures both against glibc's defaults.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys

__all__ = ["MMAP_THRESHOLD", "steady_heap", "trim"]

MMAP_THRESHOLD = 1 << 20     # bytes: a block this large or larger gets its own mapping
_M_MMAP_THRESHOLD = -3       # mallopt's parameter number (malloc.h)


@functools.lru_cache(maxsize=1)
def _libc():
    """glibc, or None (another C library or platform: nothing to tune)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None
    except OSError:
        return None


@functools.lru_cache(maxsize=1)
def steady_heap() -> bool:
    """Fix glibc's mmap threshold at ``MMAP_THRESHOLD`` for this process (once); True when it was set."""
    libc = _libc()
    return bool(libc and libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))


def trim() -> bool:
    """Hand the heap's free pages back to the system; True when some were."""
    libc = _libc()
    return bool(libc and libc.malloc_trim(0))
