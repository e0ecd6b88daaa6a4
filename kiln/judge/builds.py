"""The judge's builds: what a build job left (its layer, protocol.LAYER), written as a folder of
Runtime.layers_dir, which every slot sees read-only and a test's overlay takes as a lower layer
above its workspace; and the build cache over them (DESIGN.md, "Build cache").

A build is named by its key, the digest of what makes it (the language, its toolchain version,
the workspace's build command, the files); a hit skips the build and answers the first build's
compile answer with "cached": true. Identical submissions sent at once are built once: the others
wait for the first (`building`). Every build on disk counts against RUN_BUILD_CACHE_MAX, the cached
ones and those private to their request (too large to cache, or a key cached already): the least
recently used cached ones not in use go first to make room, and a build that finds none is
refused (NoRoom: the request is answered 503), never held beyond the bound in RAM (the layers
folder is under /run). With RUN_BUILD_CACHE_MAX=0 there is no cache and no bound: a build lives
as long as its request. The folder is the front's own (RUN_FRONT_USER, kiln's own user), 0700:
it is made at startup by serve.py and emptied at start and exit (a cache does not outlive the
service). The files in a build keep the modes below (every slot's user reads them, through its
overlay), the folder keeps every other user of the host out.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import gevent.event

from kiln.judge.answer import CompileResult
from kiln.judge.offload import offload
from kiln.wire.protocol import LayerEntry, ProtocolError

ENTRY_OVERHEAD = 512  # bytes counted per directory entry besides its data


class NoRoom(Exception):
    """No room for a new build within RUN_BUILD_CACHE_MAX: builds in use hold it."""


@dataclass
class Build:
    name: str  # its folder in the layers folder: 64 hex digits (kiln-init checks the form)
    compile: CompileResult  # the compile result of the build that made it (cached False)
    size: int
    users: int = 0
    cached: bool = False  # in the cache's index (else removed when its last user ends)
    path: str = field(default="", repr=False)


class Builds:
    def __init__(self, folder: str, max_bytes: int, log):
        self.folder = folder
        self.max_bytes = max_bytes
        self.log = log
        self.index: OrderedDict[str, Build] = OrderedDict()  # least recently used first
        self.size = 0  # of every build on disk, cached or private
        self.building: dict[str, gevent.event.Event] = {}  # keys being built now: set when done

    @staticmethod
    def key(slug: str, version: str | None, build_script: tuple[str, ...], files: tuple[tuple[str, bytes], ...]) -> str:
        digest = hashlib.sha256()
        for part in (slug, version or "", "\0".join(build_script)):
            digest.update(part.encode() + b"\0\0")
        for name, content in sorted(files):
            digest.update(name.encode() + b"\0" + str(len(content)).encode() + b"\0" + content)
        return digest.hexdigest()

    # get and put hand a build out held by its caller, who releases it with `held`: between the
    # two the cache never removes it (a build another request's eviction removed before its own
    # request used it made every test of that request IE)

    def get(self, key: str) -> Build | None:
        """A cached build of this key, now the most recently used, held for the caller."""
        build = self.index.get(key)
        if build is not None:
            self.index.move_to_end(key)
            build.users += 1
        return build

    def put(self, key: str, entries: list[LayerEntry], compile_answer: CompileResult) -> Build:
        """A new build from a build job's layer (protocol.read_layer's entries), held for the
        caller. Cached under `key` when the cache is on and it fits its bound; else private to
        its request. While builds in use fill the cache, a new one is cached and counted beyond
        the bound until enough of them are released."""
        size = sum(len(e.data) + ENTRY_OVERHEAD for e in entries)
        if self.max_bytes:
            self._evict(room_for=size)
            if self.size + size > self.max_bytes:
                raise NoRoom(f"no room for a build of {size >> 10} KiB: builds in use hold {self.size >> 10} KiB of RUN_BUILD_CACHE_MAX ({self.max_bytes >> 10} KiB)")
        cached = 0 < size <= self.max_bytes and key not in self.index
        name = key if cached else hashlib.sha256(f"{key}/{uuid.uuid4()}".encode()).hexdigest()
        path = os.path.join(self.folder, name)
        self.size += size  # counted before the write, which other requests go on beside
        try:
            offload(_write_whole, path, entries)
        except BaseException:
            self.size -= size
            raise
        build = Build(name, compile_answer, size, users=1, cached=cached, path=path)
        if cached:
            self.index[key] = build
        return build

    @contextmanager
    def built_once(self, key: str) -> Iterator[bool]:
        """Around a build of `key`: True for the one request that builds it; another request
        with the same key waits here until that build is done (then False: it looks again)."""
        pending = self.building.get(key)
        if pending is not None:
            pending.wait()
            yield False
            return
        self.building[key] = done = gevent.event.Event()
        try:
            yield True
        finally:
            del self.building[key]
            done.set()

    @contextmanager
    def held(self, build: Build) -> Iterator[Build]:
        """A build get or put handed out, released on leaving: it stays until then."""
        try:
            yield build
        finally:
            build.users -= 1
            if not build.cached and build.users == 0:
                self.size -= build.size
                shutil.rmtree(build.path, ignore_errors=True)
            self._evict()

    def _evict(self, room_for: int = 0) -> None:
        for key in list(self.index):
            if self.size + room_for <= self.max_bytes:
                return
            build = self.index[key]
            if build.users:
                continue
            del self.index[key]
            self.size -= build.size
            build.cached = False
            shutil.rmtree(build.path, ignore_errors=True)


def not_runnable(exec_argv: tuple[str, ...], entries: list[LayerEntry], workspace: str) -> str | None:
    """Why a build that exited 0 left nothing the exec command can run (None: it did). The
    judge's own rule, whatever the language (DESIGN.md: such a build is CE, never a test's IE):
    an exec command whose program is a path relative to /sandbox (judge/main,
    target/release/main) runs what the build made, so that path must be an executable regular
    file of the build's layer, or of the workspace below it. A program on the sandbox's PATH
    (java, python3, sh) is the toolchain's; what it needs of the build, the build checks."""
    program = exec_argv[0] if exec_argv else ""
    if not program or program.startswith("/"):
        return None
    made = next((e for e in entries if e.path == program), None)
    if made is None:
        shipped = os.path.join(workspace, program)
        if os.path.isfile(shipped) and os.access(shipped, os.X_OK):
            return None
        return f"kiln: the build exited 0 but made no program to run: {program} does not exist\n"
    if made.type != b"f" or not made.mode & 0o111:
        what = "a directory" if made.type == b"d" else "a symbolic link" if made.type == b"l" else "not executable"
        return f"kiln: the build exited 0 but made no program to run: {program} is {what} (a library, not a program?)\n"
    return None


def _write_whole(path: str, entries: list[LayerEntry]) -> None:
    """The build at `path` whole or not at all: written beside it, then renamed."""
    partial = os.path.join(os.path.dirname(path), f".partial-{uuid.uuid4().hex}")
    try:
        _write(partial, entries)
        os.rename(partial, path)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise


def _write(folder: str, entries: list[LayerEntry]) -> None:
    """The entries below a new folder, readable by every slot's user, never following a link
    (read_layer let through only paths below directories of the layer itself)."""
    os.mkdir(folder, 0o755)
    os.chmod(folder, 0o755)  # whatever the umask: every slot's user reads it
    top = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for entry in entries:
            if entry.type == b"d":
                os.mkdir(entry.path, 0o755, dir_fd=top)
                os.chmod(entry.path, 0o755, dir_fd=top)  # just made: a directory
            elif entry.type == b"l":
                os.symlink(bytes(entry.data), entry.path, dir_fd=top)
            else:
                mode = 0o755 if entry.mode & 0o111 else 0o644  # every slot's user reads it; no setuid
                fd = os.open(entry.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=top)
                try:
                    view = entry.data
                    while view:
                        view = view[os.write(fd, view) :]
                    os.fchmod(fd, mode)
                finally:
                    os.close(fd)
    except OSError as error:
        raise ProtocolError(f"layer: cannot write {error.filename or ''}: {error.strerror}") from None
    finally:
        os.close(top)
