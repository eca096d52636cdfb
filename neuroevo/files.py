"""Safe file writes: atomic, durable, never redirected by a planted symlink; and reads of
regular files only.

``atomic_write`` creates a unique temporary file beside the target (``tempfile.mkstemp``:
``O_CREAT | O_EXCL``, so it never opens an existing file or a symlink), writes and fsyncs
it, renames it over the target and fsyncs the directory, so a crash (even ``kill -9`` or a
power cut) leaves either the old version or the new one. A rename replaces a symlink at the
target rather than following it. On any failure the temporary file is removed and the
target is untouched; an ``OSError`` becomes a one-line ``StorageError`` that names the path
and the free space.

``read_regular`` refuses a FIFO, a device, a socket or a directory planted where a file is
expected, without blocking on it or reading from it: an ``OSError`` whose ``strerror`` says
what it is, for the caller's one-line error.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile

from neuroevo.errors import StorageError

TMP_PREFIX = ".neuroevo-"  # every temporary file starts so: stale ones are easy to find
_UMASK = os.umask(0o022)
os.umask(_UMASK)  # read once: mkstemp makes files 0600, the user's umask should decide


def free_space(path: str) -> str:
    """Free space on the file system holding ``path`` (or its nearest existing parent)."""
    probe = os.path.abspath(path)
    while not os.path.exists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    try:
        free = shutil.disk_usage(probe).free
    except OSError:
        return "unknown"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if free < 1024 or unit == "TB":
            return f"{free:.0f} {unit}" if unit == "B" else f"{free:.1f} {unit}"
        free /= 1024
    return "unknown"  # pragma: no cover


def storage_error(what: str, path: str, error: OSError) -> StorageError:
    """The one-line error for a failed write: what, where, why, and the free space."""
    reason = error.strerror or str(error)
    return StorageError(f"cannot {what} {path}: {reason} ({free_space(path)} free there); "
                        "free space or fix the permissions, then run the command again "
                        "(a run resumes from its last checkpoint)")


def fsync_dir(path: str) -> None:
    """Make a rename or a new entry in directory ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str, data: str | bytes) -> None:
    """Replace ``path`` with ``data`` atomically and durably (see the module docstring)."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, suffix=".tmp", dir=directory)
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o666 & ~_UMASK)
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
        fsync_dir(directory)
    except OSError as e:
        raise storage_error("write", path, e) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.remove(tmp)


def is_temporary(name: str) -> bool:
    return name.startswith(TMP_PREFIX) and name.endswith(".tmp")


_NOT_REGULAR = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"),
                (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                (stat.S_ISSOCK, "a socket"))


def _check_mode(path: str, mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _NOT_REGULAR if test(mode)), "special")
        raise OSError(errno.EINVAL, f"{kind}, not a regular file", path)


def check_regular(path: str) -> None:
    """Raise ``OSError`` unless ``path`` (followed through links) is a regular file; for
    readers that open the path themselves (safetensors)."""
    _check_mode(path, os.stat(path).st_mode)


def read_regular(path: str) -> bytes:
    """The bytes of the regular file ``path``; anything else is an ``OSError`` (module doc).
    The open does not block (``O_NONBLOCK``), and what it opened is checked before reading,
    so a FIFO swapped in after ``check_regular`` is refused too."""
    check_regular(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        _check_mode(path, os.fstat(fd).st_mode)
        return f.read()
