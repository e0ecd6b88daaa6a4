"""What a stored file costs its filesystem, which is what RUN_FILE_STORE_MAX bounds (not the bytes
of content: 2000 uploads of 16 bytes counted 31 KiB and took ~11 MiB and 2000 inodes).

A file is charged its content rounded up to whole blocks, plus, for each inode it takes (the file,
and an owner's mark, kiln/judge/files.py), that inode's share of the filesystem: its size over its
inode count (ext4 makes one inode per 16 KiB by default), at least a block. So the store's bound
bounds its blocks and its inodes alike: within RUN_FILE_STORE_MAX of a filesystem's bytes, the
store never takes more of its inodes than that share of them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Footprint:
    block: int  # bytes a file's content is rounded up to
    inode: int  # bytes each inode counts

    @classmethod
    def of(cls, folder) -> Footprint:
        """The filesystem's own: its fundamental block size, and its bytes per inode (a
        filesystem that reports no inode count, as btrfs does: a block)."""
        fs = os.statvfs(folder)
        block = fs.f_frsize or fs.f_bsize or 4096
        share = fs.f_blocks * block // fs.f_files if fs.f_files else 0
        return cls(block, max(block, share))

    def charge(self, size: int, inodes: int) -> int:
        """A file of `size` bytes that takes `inodes` inodes."""
        return -(-size // self.block) * self.block + inodes * self.inode

    def largest(self, bound: int, inodes: int) -> int:
        """The largest content whose charge with `inodes` inodes fits in `bound` (0: none)."""
        return max(0, (bound - inodes * self.inode) // self.block * self.block)
