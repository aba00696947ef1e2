"""Keep freed memory in the process instead of handing it back to the kernel after every tensor.

glibc serves large blocks (a UniSpeech forward allocates a 150 MB broadcast product) with mmap and unmaps
them on free, so the next forward page-faults all of it in again: measured here, 0.13 s of a 0.045 s
forward was spent that way (outputs bit-identical either way: where memory lives never changes the
arithmetic). Raising glibc's mmap and trim thresholds makes freed blocks reusable; elsewhere (macOS, musl)
it does nothing.

Applied nowhere now: the gathered codevector lookup removed that temporary from the checks, and
`workbook.benchmark_allocator` (part of `make bench`) measured the checks with and without it at 0.95x on
UniSpeech (no gain, under the 10% a trick must earn). Kept so that the benchmark can measure it again.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


@functools.cache
def keep_freed_memory() -> bool:
    """True when glibc accepted the settings."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    # blocks up to 1 GiB come from the heap; freed memory is never trimmed back to the kernel
    return bool(mallopt(_M_MMAP_THRESHOLD, 2**30)) and bool(mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))
