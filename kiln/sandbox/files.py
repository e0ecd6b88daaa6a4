"""Writing the request's files below the workspace, as root, without following anything.

The workspace comes from the operator, but a path written by root must never be redirected
elsewhere: every path resolves beneath /sandbox with no symlinks, no magic links and no mount
crossing, and only regular files are written.
"""

from __future__ import annotations

import os
import stat

from kiln.sandbox import libc

RESOLVE = libc.RESOLVE_BENEATH | libc.RESOLVE_NO_SYMLINKS | libc.RESOLVE_NO_MAGICLINKS | libc.RESOLVE_NO_XDEV
WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC


def open_dir(path: str) -> int:
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW)


def make_writable(root_fd: int, relpath: str, uid: int, gid: int) -> None:
    """Give the task a directory of the workspace (a metadata copy-up on the overlay)."""
    if relpath in ("", "."):
        os.fchown(root_fd, uid, gid)
        return
    fd = libc.openat2(root_fd, relpath, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, 0, RESOLVE)
    try:
        os.fchown(fd, uid, gid)
    finally:
        os.close(fd)


def ensure_dir(root_fd: int, relpath: str, uid: int, gid: int) -> None:
    """Create the parents of a request file that the workspace lacks, owned by the task."""
    parts = [p for p in relpath.split("/") if p]
    for depth in range(1, len(parts) + 1):
        sub = "/".join(parts[:depth])
        try:
            os.mkdir(sub, 0o755, dir_fd=root_fd)
        except FileExistsError:
            continue
        make_writable(root_fd, sub, uid, gid)


def write_file(root_fd: int, relpath: str, content: bytes, uid: int, gid: int) -> None:
    fd = libc.openat2(root_fd, relpath, WRITE_FLAGS, 0o644, RESOLVE)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{relpath} is not a regular file")
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view):]
        os.fchown(fd, uid, gid)
    finally:
        os.close(fd)
