"""Safe file writes: atomic, durable, never redirected by a planted symlink; and reads of
regular files only.

``atomic_write`` creates a unique temporary file beside the target (``tempfile.mkstemp``:
``O_CREAT | O_EXCL``, so it never opens an existing file or a symlink), writes and fsyncs
it, renames it over the target and fsyncs the directory, so a crash (even ``kill -9`` or a
power cut) leaves either the old version or the new one. A rename replaces a symlink at the
target rather than following it. On any failure the temporary file is removed and the
target is untouched; an ``OSError`` becomes a one-line ``StorageError`` that names the path
and the cause: the path itself (too long, a missing parent, a file on the way), else the
free space.

``make_dirs`` is ``os.makedirs(path, exist_ok=True)`` that removes what it made when it
fails part-way, so a path too long for the file system leaves no empty folders behind.

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
    """The one-line error for a failed write: what, where, why, and the fix. A path that
    cannot exist (too long, a missing parent, a file on the way) names that; the other
    causes (a full disk, a quota, no permission, a read-only or unknown failure) name the
    free space."""
    reason = error.strerror or str(error)
    cause = _path_cause(path, error.errno)
    if cause is not None:
        return StorageError(f"cannot {what} {_shown(path)}: {reason}: {cause}")
    return StorageError(f"cannot {what} {_shown(path)}: {reason} ({free_space(path)} free "
                        "there); free space or fix the permissions, then run the command "
                        "again (a run resumes from its last checkpoint)")


def _path_cause(path: str, code: int | None) -> str | None:
    """Why ``path`` cannot be made, and the fix, for the errnos that are about the path
    itself; None for the others, or when the path does not show the cause (``/proc``
    answers ENOENT for a new entry under a directory that exists)."""
    if code == errno.ENAMETOOLONG:
        name_max, path_max = _limits(path)
        long = next((p for p in path.split(os.sep) if len(os.fsencode(p)) > name_max), None)
        if long is not None:
            return (f"the name {_shown(long, 40)!r} in it is too long ({len(os.fsencode(long))} "
                    f"bytes; at most {name_max} here): pick a shorter --run-dir or output path")
        if len(os.fsencode(path)) >= path_max:
            return (f"the path is too long ({len(path)} characters; at most {path_max - 1} "
                    "bytes here): pick a shorter --run-dir or output path")
    if code == errno.ENOENT:
        parent = os.path.dirname(path) or "."
        if not os.path.lexists(parent):
            return (f"its parent directory {_shown(parent)} does not exist: create it or pick "
                    "another path")
    if code == errno.EEXIST and os.path.lexists(path) and not os.path.isdir(path):
        return "a file is there, not a directory: pick another path, or move that file"
    if code == errno.ENOTDIR:
        blocker = _non_directory_on_the_way(path)
        if blocker is not None:
            return (f"{_shown(blocker)} on the way is a file, not a directory: pick another "
                    "path, or move that file")
    return None


def _limits(path: str) -> tuple[int, int]:
    """``(NAME_MAX, PATH_MAX)`` of the file system holding ``path``'s nearest existing parent
    (Linux's 255 and 4096 where it does not say)."""
    probe = os.path.abspath(path)
    while not os.path.isdir(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    limits = []
    for name, default in (("PC_NAME_MAX", 255), ("PC_PATH_MAX", 4096)):
        try:
            value = os.pathconf(probe, name)
        except (OSError, ValueError):
            value = -1
        limits.append(value if value > 0 else default)  # -1: no limit said
    return limits[0], limits[1]


def _non_directory_on_the_way(path: str) -> str | None:
    """The first folder of ``path`` that exists and is not a directory."""
    part = ""
    for piece in os.path.dirname(path).split(os.sep):
        part = os.path.join(part, piece) if part else (piece or os.sep)
        if os.path.lexists(part) and not os.path.isdir(part):
            return part
    return None


def _shown(text: str, keep: int = 200) -> str:
    """``text``, its middle cut when longer than ``keep``: a one-line error stays readable
    when the path is what is too long."""
    if len(text) <= keep:
        return text
    return f"{text[:keep // 2]}...{text[-(keep // 2):]}"


def make_dirs(path: str) -> None:
    """``os.makedirs(path, exist_ok=True)`` that, when it fails part-way (a path too long
    for the file system, a full disk), removes the directories it made itself, deepest
    first, before re-raising the ``OSError``: a failed run leaves no trail of empty folders.
    A directory another process made meanwhile is not ours, and stays.

    >>> # make_dirs("runs/es-hopper/checkpoint")
    """
    missing, head = [], path.rstrip(os.sep) or path
    while head and not os.path.lexists(head):  # the folders to make, deepest first
        missing.append(head)
        parent = os.path.dirname(head)
        if parent == head:
            break
        head = parent
    if not missing:
        if not os.path.isdir(path):
            os.mkdir(path)  # raises as os.makedirs does: a file there, or an empty path
        return
    made: list[str] = []
    try:
        for folder in reversed(missing):
            try:
                os.mkdir(folder)
            except FileExistsError:
                if not os.path.isdir(folder):
                    raise
                continue  # made meanwhile (or ``..`` in the path): not ours to remove
            made.append(folder)
    except OSError:
        for folder in reversed(made):
            with contextlib.suppress(OSError):  # not empty: someone wrote into it meanwhile
                os.rmdir(folder)
        raise


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
