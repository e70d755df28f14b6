"""Lock files opened without following symbolic links: what every ``fcntl.flock`` of jitlab opens.

    fh = open_lock_file(run_dir / "run.lock")      # a file object, read/write, close-on-exec
    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)

A lock file is written (the holder's PID) or at least opened for writing, so a ``run.lock``, ``batch.lock`` or
``bank.sqlite.lock`` that is a symbolic link would have its target truncated and overwritten. The file is opened
with ``O_NOFOLLOW`` (a link in the last component is refused by the kernel, with no window between a check and
the open) and must then be a regular file (not a directory, FIFO or device). Either refusal is a StorageError
naming the file and what to do; the lock file itself is only created, never removed.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from jitlab.errors import StorageError

__all__ = ["check_lock_path", "open_lock_file"]


def check_lock_path(path: str | Path) -> None:
    """StorageError when ``path`` is a symbolic link or exists and is not a regular file: what :func:`open_lock_file`
    refuses, said before a command writes anything else (a JIT run checks its bank's lock before its run directory)."""
    path = Path(path)
    if path.is_symlink():
        raise StorageError(f"lock file {path} is a symbolic link (to {os.readlink(path)}); jitlab never writes a lock "
                           "through one: remove the link and rerun (the lock file is recreated)")
    if path.exists() and not path.is_file():
        kind = "a directory" if path.is_dir() else "not a regular file (a FIFO, socket or device)"
        raise StorageError(f"lock file {path} is {kind}; move it away and rerun")


def open_lock_file(path: str | Path):
    """``path`` opened read/write (created 0644 when absent) as a text file object, refusing a symbolic link and
    anything that is not a regular file (StorageError); other OSErrors (permissions, a full disk) propagate."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError:
        check_lock_path(path)  # ELOOP: the last component is a link; EISDIR: a directory
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        check_lock_path(path)
        raise StorageError(f"lock file {path} is not a regular file; move it away and rerun")
    return os.fdopen(fd, "r+")
