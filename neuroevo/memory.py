"""Give the C heap's free pages back to the system once a generation.

A generation allocates and frees activations of a new batch size at almost every step (only
running episodes are computed), from several threads' malloc arenas. glibc keeps what is
freed inside its arenas, so the resident set of a long Atari run creeps up while the memory
in use does not: in a pong GA run (population 64, cap 1000) ``mallinfo2`` showed 252 MiB in
use from generation 3 to 19 while the arenas' free bytes went from 173 to 245 MiB and RSS
with them (+7.5%). ``malloc_trim(0)`` hands the free pages back (``madvise``) in about 7 ms
for that heap; afterwards RSS stayed within 806-817 MiB over the same generations
(experiments/soak/). Elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util

_trim = None
try:
    _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    _trim = getattr(_libc, "malloc_trim", None)
except OSError:  # no C library to load by that name (not Linux): nothing to trim
    pass
if _trim is not None:
    _trim.argtypes, _trim.restype = [ctypes.c_size_t], ctypes.c_int


def release_free_memory() -> bool:
    """Return the C heap's free pages to the system; True if any were returned."""
    return bool(_trim(0)) if _trim is not None else False
