"""The judge's file store (DESIGN.md, Judge API, "File store"): content-addressed files a client
uploads once (`POST /files`, kiln/http/files_api.py) and judge requests name by id.

On disk, under RUN_FILE_STORE (made by serve.py, owned by RUN_FRONT_USER, mode 0700; the
files and folders in it the front's alone too, 0600 and 0700):

    <store>/sha256/<64 hex>          a whole file whose SHA-256 is its name
    <store>/sha256/.partial-<hex>    an upload in progress (removed at startup: a crash's leftover)
    <store>/owners/<owner>/<64 hex>  an empty file: that owner uploaded it (where API keys are
                                     configured, an owner is a digest of the key: kiln/http)

Owners: where RUN_API_KEYS are configured, a file is one client's (or several clients', when each
uploaded the same bytes): another key neither reads, nor deletes, nor names it in a judge request,
nor learns from an upload's 200 that someone had it (the answer is 201 for a client that had not).
A DELETE takes the file from its client; the file goes with its last owner. Without keys there is
one owner, "" (every client sees every file), and the file store is as before; a file uploaded
without keys is nobody's once keys are configured.

An upload is written to a partial file in the same folder, hashed while it streams, fsynced,
hashed again from the disk and compared, then renamed to its digest and the folder fsynced: a
file under a digest's name is always the whole of that content, whenever kiln was stopped. A
file's last use is its mtime (set on each use), so the least-recently-used order survives a
restart: the index is rebuilt from the folder when the store is made.

Bounded by RUN_FILE_STORE_MAX: the files plus the uploads in progress, each counted by what it
costs the filesystem (kiln/judge/footprint.py: whole blocks, and each inode it takes, its marks
too). Room is made by removing the least recently used files, never a file pinned by a running
judge request; an upload that cannot get room is refused (StoreFull) rather than growing the
store past its bound.

Past 400 lines: the store's one invariant (index, owners, bound and disk kept in step) is easier
to check in one module than split.

The front is one gevent process: the index is a plain dict, no locks; nothing yields between a
check and the change it guards. fsync and the second hash run in gevent's thread pool.
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from kiln.judge.footprint import Footprint
from kiln.judge.offload import offload

FILE_ID = re.compile(r"sha256:[0-9a-f]{64}")
PREFIX = "sha256:"
PARTIAL = ".partial-"
_HEX = re.compile(r"[0-9a-f]{64}")
_OWNER = re.compile(r"[0-9a-f]{1,64}")  # a key's digest; "" (no keys) has no folder
_VERIFY_CHUNK = 1 << 20


class UnknownFile(Exception):
    """No such file in the store (or deleted); str() is the id."""

    def __init__(self, file_id: str):
        super().__init__(file_id)
        self.file_id = file_id


class TooLarge(Exception):
    """The upload passed the store's per-file limit (RUN_FILE_MAX, or the largest file whose
    footprint fits in RUN_FILE_STORE_MAX)."""


class StoreFull(Exception):
    """No room for the upload even after evicting every file not pinned."""


class DigestMismatch(Exception):
    """What reached the disk is not what was received: nothing was stored."""


@dataclass
class _Entry:
    size: int
    pins: int = 0
    deleted: bool = False  # DELETEd while pinned: invisible, removed with its last pin
    owners: set[str] = field(default_factory=set)  # "": uploaded where no API keys were configured

    @property
    def inodes(self) -> int:
        """the file's, and a mark for each owner but "" (which has none)"""
        return 1 + sum(1 for owner in self.owners if owner)


@dataclass(frozen=True)
class Stored:
    id: str
    size: int
    created: bool  # False: the store had it already


class FileStore:
    def __init__(self, root: Path, file_max: int, store_max: int, log, footprint: Footprint | None = None):
        self.root = Path(root)
        self.folder = self.root / "sha256"
        self.owners = self.root / "owners"
        self.file_max = file_max
        self.store_max = store_max
        self.log = log
        self._index: OrderedDict[str, _Entry] = OrderedDict()  # least recently used first
        self.total = 0  # the footprint of the files in the index (kiln/judge/footprint.py)
        self.reserved = 0  # the footprint of the uploads in progress, so far
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.owners.mkdir(mode=0o700, exist_ok=True)
        self.footprint = footprint or Footprint.of(self.folder)
        # one file's largest size: its own and an owner's mark fit in the store
        self.limit = min(file_max, self.footprint.largest(store_max, 2))
        self._rebuild()

    # -- the judge's interface ------------------------------------------------------------------
    @contextmanager
    def pinned(self, ids: Iterable[str], owner: str = "") -> Iterator[None]:
        """While inside, none of these files is evicted or removed (a DELETE marks it, and it goes
        with its last pin). UnknownFile for the first id the store lacks (or `owner` does not
        have), before pinning any. Counts as a use of each."""
        wanted = list(dict.fromkeys(ids))
        for file_id in wanted:
            if not self._visible(file_id, owner):
                raise UnknownFile(file_id)
        for file_id in wanted:
            self._index[file_id].pins += 1
            self._use(file_id)
        try:
            yield
        finally:
            for file_id in wanted:
                entry = self._index[file_id]
                entry.pins -= 1
                if not entry.pins and entry.deleted:
                    self._remove(file_id, "deleted")
            self._make_room(0)  # pins may have held the store over its bound (a lowered max)

    def path(self, file_id: str) -> Path:
        """The file's path; only valid while it is pinned."""
        self._entry(file_id)
        return self.folder / file_id[len(PREFIX) :]

    def size(self, file_id: str) -> int:
        return self._entry(file_id).size

    def read(self, file_id: str) -> bytes:
        """The whole content (for small files)."""
        with os.fdopen(self.descriptor(file_id), "rb") as file:
            return file.read()

    def descriptor(self, file_id: str) -> int:
        """A new descriptor of the file, open for reading only; the caller's to close. Only
        valid while it is pinned (the open file stays readable whatever happens after)."""
        self._entry(file_id)
        return os.open(self.folder / file_id[len(PREFIX) :], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)

    # -- the HTTP interface ---------------------------------------------------------------------
    def upload(self, owner: str = "") -> Upload:
        """A new upload of `owner`'s: write() its chunks, then commit(); abort() (or leaving its
        `with` without committing) removes what was written."""
        return Upload(self, owner)

    def put(self, data: bytes, owner: str = "") -> Stored:
        with self.upload(owner) as upload:
            upload.write(data)
            return upload.commit()

    def open(self, file_id: str, owner: str = "") -> tuple[BinaryIO, int]:
        """The file open for reading, and its size (a use). The open file stays readable
        whatever happens to the store meanwhile."""
        if not self._visible(file_id, owner):
            raise UnknownFile(file_id)
        fd = os.open(self.folder / file_id[len(PREFIX) :], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        self._use(file_id)
        return os.fdopen(fd, "rb"), self._index[file_id].size

    def delete(self, file_id: str, owner: str = "") -> bool:
        """False if `owner` does not have it. The file is taken from `owner` (from every owner
        without keys); it goes with its last owner, and a pinned file with its last pin."""
        if not self._visible(file_id, owner):
            return False
        entry = self._index[file_id]
        for gone in list(entry.owners) if not owner else [owner]:
            self._disown(file_id, gone)
        if entry.owners:
            return True
        if entry.pins:
            entry.deleted = True
        else:
            self._remove(file_id, "deleted")
        return True

    def __contains__(self, file_id: str) -> bool:
        return self._visible(file_id, "")

    def ids(self) -> list[str]:
        """The files, least recently used first."""
        return [file_id for file_id, entry in self._index.items() if not entry.deleted]

    # -- inside ---------------------------------------------------------------------------------
    def _visible(self, file_id: str, owner: str) -> bool:
        entry = self._index.get(file_id)
        return entry is not None and not entry.deleted and (not owner or owner in entry.owners)

    def _own(self, file_id: str, owner: str) -> bool:
        """Records that `owner` has the file; True if it had not."""
        entry = self._index[file_id]
        if owner in entry.owners:
            return False
        before = entry.inodes
        entry.owners.add(owner)
        if owner:  # a file kept from before keys were configured is now this client's alone
            entry.owners.discard("")
            self.total += (entry.inodes - before) * self.footprint.inode
            folder = self.owners / owner
            folder.mkdir(mode=0o700, exist_ok=True)
            (folder / file_id[len(PREFIX) :]).touch(mode=0o600)
        return True

    def _disown(self, file_id: str, owner: str) -> None:
        entry = self._index[file_id]
        if owner in entry.owners and owner:
            self.total -= self.footprint.inode
        entry.owners.discard(owner)
        if owner:
            _unlink(self.owners / owner / file_id[len(PREFIX) :])

    def _entry(self, file_id: str) -> _Entry:
        entry = self._index.get(file_id)
        if entry is None:
            raise UnknownFile(file_id)
        return entry

    def _use(self, file_id: str) -> None:
        self._index.move_to_end(file_id)
        try:
            os.utime(self.folder / file_id[len(PREFIX) :])  # the order a restart rebuilds
        except OSError:
            pass

    def _rebuild(self) -> None:
        found, partial, strangers = [], 0, 0
        with os.scandir(self.folder) as entries:
            for item in entries:
                if item.name.startswith(PARTIAL):
                    _unlink(item.path)
                    partial += 1
                elif _HEX.fullmatch(item.name) and item.is_file(follow_symlinks=False):
                    stat = item.stat(follow_symlinks=False)
                    found.append((stat.st_mtime_ns, item.name, stat.st_size))
                else:
                    strangers += 1
        for _mtime, name, size in sorted(found):
            self._index[PREFIX + name] = _Entry(size, owners={""})
            self.total += self.footprint.charge(size, 1)
        with os.scandir(self.owners) as owners:
            for owner in owners:
                if not (_OWNER.fullmatch(owner.name) and owner.is_dir(follow_symlinks=False)):
                    continue
                with os.scandir(owner.path) as marks:
                    for mark in marks:
                        entry = self._index.get(PREFIX + mark.name)
                        if entry is None:
                            _unlink(mark.path)  # its file went while kiln was down
                        else:
                            self.total += self.footprint.inode if owner.name not in entry.owners else 0
                            entry.owners.discard("")
                            entry.owners.add(owner.name)
        self.log.info("file store", path=str(self.folder), files=len(found), footprint=self.total, partial_removed=partial)
        if strangers:
            self.log.warning("file store: entries that are not files of the store, left alone", path=str(self.folder), count=strangers)
        self._make_room(0)  # RUN_FILE_STORE_MAX lowered since the last start

    def _reserve(self, size: int) -> None:
        if not self._make_room(size):
            raise StoreFull()
        self.reserved += size

    def _charge(self, entry: _Entry) -> int:
        return self.footprint.charge(entry.size, entry.inodes)

    def _make_room(self, extra: int) -> bool:
        """Evict least recently used files not pinned until `extra` more of footprint fits;
        False, and nothing evicted, if that cannot be done."""
        need = self.total + self.reserved + extra - self.store_max
        if need <= 0:
            return True
        victims, freed = [], 0
        for file_id, entry in self._index.items():
            if entry.pins:
                continue
            victims.append(file_id)
            freed += self._charge(entry)
            if freed >= need:
                break
        if freed < need:
            return False
        for file_id in victims:
            self._remove(file_id, "evicted")
        return True

    def _remove(self, file_id: str, why: str) -> None:
        for owner in list(self._index[file_id].owners):
            self._disown(file_id, owner)
        entry = self._index.pop(file_id)
        self.total -= self._charge(entry)
        _unlink(self.folder / file_id[len(PREFIX) :])
        self.log.info(f"file {why}", file=file_id, size=entry.size, store_footprint=self.total)

    def _commit(self, upload: Upload, digest: str) -> Stored:
        file_id = PREFIX + digest
        self.reserved -= upload.reserved
        upload.reserved = 0
        entry = self._index.get(file_id)
        if entry is not None:  # had it already (a deleted but pinned one comes back)
            _unlink(upload.temp)
            created = self._own(file_id, upload.owner) or entry.deleted
            entry.deleted = False
            self._use(file_id)
            return Stored(file_id, entry.size, created)
        os.rename(upload.temp, self.folder / digest)
        self._index[file_id] = _Entry(upload.size)
        self.total += self.footprint.charge(upload.size, 1)
        self._own(file_id, upload.owner)  # and its mark
        offload(_fsync_folder, self.folder)
        return Stored(file_id, upload.size, True)


class Upload:
    def __init__(self, store: FileStore, owner: str = ""):
        if owner and not _OWNER.fullmatch(owner):
            raise ValueError(f"owner {owner!r}: a key's hex digest")
        self.store = store
        self.owner = owner
        self.size = 0
        self.reserved = 0  # of the store's reservation, this upload's part: its footprint so far
        self.inodes = 2 if owner else 1  # the file, and its owner's mark
        self.temp = store.folder / f"{PARTIAL}{uuid.uuid4().hex}"
        self._hash = hashlib.sha256()
        self._fd = os.open(self.temp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        self._done = False

    def write(self, chunk: bytes) -> None:
        """TooLarge past the store's per-file limit, StoreFull when no room can be made (the
        upload is then to be aborted); an OSError of the disk (ENOSPC...) as it comes."""
        if self.size + len(chunk) > self.store.limit:
            raise TooLarge()
        self._reserve_for(self.size + len(chunk))
        _write_all(self._fd, chunk)
        self._hash.update(chunk)
        self.size += len(chunk)

    def _reserve_for(self, size: int) -> None:
        """The store's reservation grown to this upload's footprint at `size` bytes."""
        grown = self.store.footprint.charge(size, self.inodes) - self.reserved
        if grown > 0:
            self.store._reserve(grown)
            self.reserved += grown

    def commit(self) -> Stored:
        """fsync, check the disk holds what was hashed, rename to the digest (or drop it when the
        store has it already). DigestMismatch: nothing stored; StoreFull: no room for its inodes
        (an empty upload reserved nothing yet), to be aborted as after a write."""
        self._reserve_for(self.size)
        digest = self._hash.hexdigest()
        try:
            offload(os.fsync, self._fd)
            on_disk = offload(_digest_of, self._fd)
        finally:
            os.close(self._fd)
            self._fd = -1
        if on_disk != digest:
            self.abort()
            self.store.log.error("file store: an upload's bytes on disk are not the bytes received; not stored", received=PREFIX + digest, on_disk=PREFIX + on_disk, size=self.size)
            raise DigestMismatch(f"received {PREFIX}{digest}, disk has {PREFIX}{on_disk}")
        try:
            stored = self.store._commit(self, digest)
        except BaseException:
            self.abort()
            raise
        self._done = True
        return stored

    def abort(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        _unlink(self.temp)
        self.store.reserved -= self.reserved
        self.reserved = 0
        self._done = True

    def __enter__(self) -> Upload:
        return self

    def __exit__(self, *exc) -> None:
        if not self._done:
            self.abort()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _digest_of(fd: int) -> str:
    digest, offset = hashlib.sha256(), 0
    while chunk := os.pread(fd, _VERIFY_CHUNK, offset):
        digest.update(chunk)
        offset += len(chunk)
    return digest.hexdigest()


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink(path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass

