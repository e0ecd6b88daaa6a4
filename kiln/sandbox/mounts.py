"""Mount syscalls, one small function per kind of mount the sandbox makes."""

from __future__ import annotations

import os
import stat

from kiln.sandbox import libc
from kiln.sandbox.libc import MS_BIND, MS_NODEV, MS_NOEXEC, MS_NOSUID, MS_RDONLY, MS_REC, MS_REMOUNT
from kiln.sandbox.plan import Bind, Device, Directory, File, Link, Tmpfs

READONLY_ATTRS = libc.MOUNT_ATTR_RDONLY | libc.MOUNT_ATTR_NOSUID | libc.MOUNT_ATTR_NODEV
MountArgs = tuple[str | None, str, str | None, int, str | None]


def under(root: str, path: str) -> str:
    """`path` of the new root, seen from before pivot_root (`root` is the staging directory)."""
    return root.rstrip("/") + path


def make_private() -> None:
    """First thing in a new mount namespace: without it mounts propagate back to the host on
    systemd machines (shared propagation), and pivot_root fails with EINVAL."""
    libc.mount(*PRIVATE_ARGS)


def _tmpfs_flags(fs: Tmpfs) -> int:
    return MS_NOSUID | (MS_NODEV if fs.nodev else 0) | (MS_NOEXEC if fs.noexec else 0)


# mount(2)'s arguments (source, target, fstype, flags, data) for each kind of mount: applied
# here for the Python slots, and compiled into kiln-init's recipe (recipe.py) for the others.


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
    mount: bind_readonly then sets the whole tree read-only, nosuid, nodev (mount_setattr)."""
    return (source, target, None, MS_BIND | (MS_REC if recursive else 0), None)


PRIVATE_ARGS: MountArgs = (None, "/", None, MS_REC | libc.MS_PRIVATE, None)
# Only this pid namespace's processes (hidepid=invisible), and none of procfs' host-wide files
# (subset=pid): no /proc/sys, /proc/kcore, /proc/sysrq-trigger, ...
PROC_ARGS: MountArgs = ("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "subset=pid,hidepid=invisible")


def overlay_args(target: str, lower: str, upper: str, work: str) -> MountArgs:
    return ("kiln", target, "overlay", MS_NOSUID | MS_NODEV, f"lowerdir={lower},upperdir={upper},workdir={work}")


def mount_tmpfs(target: str, fs: Tmpfs) -> None:
    libc.mount(*tmpfs_args(target, fs))


def resize_tmpfs(target: str, fs: Tmpfs) -> None:
    libc.mount(*resize_args(target, fs))


def make_readonly(target: str, fs: Tmpfs) -> None:
    libc.mount(*readonly_args(target, fs))


def bind_readonly(source: str, target: str, recursive: bool) -> None:
    libc.mount(*bind_args(source, target, recursive))
    libc.mount_setattr(target, READONLY_ATTRS, recursive=recursive)


def make_directory(root: str, directory: Directory) -> None:
    path = under(root, directory.path)
    os.mkdir(path, directory.mode)
    os.chmod(path, directory.mode)  # mkdir's mode is filtered by the umask


def make_link(root: str, link: Link) -> None:
    os.symlink(link.target, under(root, link.path))


def make_mount_point(root: str, bind: Bind) -> None:
    path = under(root, bind.path)
    if bind.is_dir:
        os.makedirs(path, 0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(path), 0o755, exist_ok=True)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o444))


def write_file(root: str, file: File) -> None:
    fd = os.open(under(root, file.path), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, file.mode)
    try:
        os.write(fd, file.content)
        os.fchmod(fd, file.mode)
    finally:
        os.close(fd)


def make_device(root: str, device: Device) -> None:
    """mknod instead of binding the host's nodes: the same device, one syscall, no extra mount."""
    path = under(root, device.path)
    os.mknod(path, stat.S_IFCHR | device.mode, os.makedev(device.major, device.minor))
    os.chmod(path, device.mode)


def mount_proc() -> None:
    libc.mount(*PROC_ARGS)


def pivot_into(new_root: str) -> None:
    """pivot_root(".", ".") stacks the old root on top of the new one; detaching it leaves the
    new root as "/" with no path back to the host's tree."""
    os.chdir(new_root)
    libc.pivot_root(".", ".")
    libc.umount2(".", libc.MNT_DETACH)
    os.chdir("/")


def mount_overlay(target: str, lower: str, upper: str, work: str) -> None:
    libc.mount(*overlay_args(target, lower, upper, work))


def current_namespace() -> int:
    """A descriptor of this process's mount namespace: it keeps the namespace alive, mounts and
    all, after every process has left it, and setns(2) enters it."""
    return os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)


def enter_copy(template: int | None = None) -> None:
    """Move into a private copy of `template`'s mounts (by default, of this process's own mount
    namespace): unshare copies the mount tree, root and working directory follow into the
    copy, and what is mounted afterwards stays in it. Copying ~15 mounts costs less than
    making them."""
    if template is not None:
        libc.setns(template, libc.CLONE_NEWNS)  # root and cwd: the template's root
    libc.unshare(libc.CLONE_NEWNS)


def detach(target: str) -> None:
    libc.umount2(target, libc.MNT_DETACH)
