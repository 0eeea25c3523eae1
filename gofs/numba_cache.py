"""One numba compilation at a time across the processes of a machine, so numba's on-disk kernel cache stays whole.

numba's cache (``cache=True``) names a new entry's data file by the first number free in the index it
read. Two processes compiling different signatures of one kernel at once (Spark's Python workers after a
kernel file changed) can both take the same number and leave an index entry that points at the other
signature's machine code (numba issues 4807 and 10128), which a later process loads for the wrong types.
numba holds its compiler lock while it loads, compiles and saves a kernel; :func:`serialise_compilation`
hangs an OS file lock on that lock through numba's event API, so the whole span runs in one process at a
time. Every kernel module calls it on import; it registers once per process and costs a lock only when
numba compiles or loads a kernel, never on a call of a compiled one.
"""
from __future__ import annotations

import os
import tempfile
import threading

from numba.core import event

try:
    import fcntl
except ImportError:  # not POSIX: numba's own behaviour
    fcntl = None

__all__ = ["serialise_compilation", "lock_path"]

_registered = False


def lock_path() -> str:
    """The lock file shared by the processes that share this install's kernel cache: beside the
    package's bytecode when that is writable (numba caches there too), else one per user in the
    temporary directory (numba then caches in the user's cache directory)."""
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__")
    if os.access(here, os.W_OK) or (not os.path.exists(here) and os.access(os.path.dirname(here), os.W_OK)):
        os.makedirs(here, exist_ok=True)
        return os.path.join(here, "numba-compile.lock")
    return os.path.join(tempfile.gettempdir(), f"goffish-numba-compile-{os.getuid()}.lock")


class _FileLockOnCompilerLock(event.Listener):
    """Takes the file lock when this process first enters numba's compiler lock, releases it when it
    leaves the outermost one. The file is opened per hold, never kept: a forked child must not share
    the parent's open file (and so its lock)."""

    def __init__(self, path: str):
        self._path = path
        self._mutex = threading.RLock()
        self._depth = 0
        self._fd = None

    def on_start(self, event_):
        self._mutex.acquire()
        self._depth += 1
        if self._depth == 1:
            try:
                fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
            except OSError:
                return  # an unusable lock file leaves numba as it is
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._fd = fd

    def on_end(self, event_):
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fd, self._fd = self._fd, None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        self._mutex.release()


def serialise_compilation() -> None:
    """Register the file lock on numba's compiler lock in this process (once)."""
    global _registered
    if _registered or fcntl is None:
        return
    event.register("numba:compiler_lock", _FileLockOnCompilerLock(lock_path()))
    _registered = True
