"""The mounts the sandbox makes, as mount(2)'s arguments (source, target, fstype, flags, data):
kiln.zygote.recipe compiles them into kiln-init's steps."""

from __future__ import annotations

from kiln.sandbox import libc
from kiln.sandbox.libc import MS_BIND, MS_NODEV, MS_NOEXEC, MS_NOSUID, MS_RDONLY, MS_REC, MS_REMOUNT
from kiln.sandbox.plan import Tmpfs

READONLY_ATTRS = libc.MOUNT_ATTR_RDONLY | libc.MOUNT_ATTR_NOSUID | libc.MOUNT_ATTR_NODEV
MountArgs = tuple[str | None, str, str | None, int, str | None]


def under(root: str, path: str) -> str:
    """`path` of the new root, seen from before pivot_root (`root` is the staging directory)."""
    return root.rstrip("/") + path


def _tmpfs_flags(fs: Tmpfs) -> int:
    return MS_NOSUID | (MS_NODEV if fs.nodev else 0) | (MS_NOEXEC if fs.noexec else 0)


def tmpfs_args(target: str, fs: Tmpfs) -> MountArgs:
    return ("kiln", target, "tmpfs", _tmpfs_flags(fs), fs.options)


def resize_args(target: str, fs: Tmpfs) -> MountArgs:
    """A remount that leaves out MS_NOSUID/MS_NODEV would clear them: repeat them."""
    return (None, target, None, MS_REMOUNT | _tmpfs_flags(fs), f"size={fs.size},nr_inodes={fs.inodes}")


def readonly_args(target: str, fs: Tmpfs) -> MountArgs:
    """A per-mount flag (MS_BIND); the remount replaces every per-mount flag, so repeat them."""
    return (None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _tmpfs_flags(fs), None)


def bind_args(source: str, target: str, recursive: bool) -> MountArgs:
    """A bind ignores MS_RDONLY on its first call, and a plain remount only changes the top
    mount: the recipe then sets the whole tree READONLY_ATTRS with mount_setattr."""
    return (source, target, None, MS_BIND | (MS_REC if recursive else 0), None)


# First thing in a new mount namespace: without it mounts propagate back to the host on systemd
# machines (shared propagation), and pivot_root fails with EINVAL.
PRIVATE_ARGS: MountArgs = (None, "/", None, MS_REC | libc.MS_PRIVATE, None)
# Only this pid namespace's processes (hidepid=invisible), and none of procfs' host-wide files
# (subset=pid): no /proc/sys, /proc/kcore, /proc/sysrq-trigger, ...
def proc_args(target: str) -> MountArgs:
    return ("proc", target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "subset=pid,hidepid=invisible")


OVERLAY_FLAGS = MS_NOSUID | MS_NODEV  # the workspace overlay's (kiln-init's OP_OVERLAY composes its data)
