"""What a judge request's texts are made of, read for a job: a test's input or answer, or a
build's source files (the submission's, the checker's, the interactor's), each given inline or as
a file of the store (`{"file": id}` in a `files` object, `stdin_file` and `expected_file` in a
test). The front pins the store's files a request names before the judge reads any
(kiln/http/api.py `on_judge`), so every id here is there, and the requester's."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from kiln.judge.files import FileStore
from kiln.judge.request import Source
from kiln.wire.protocol import ByDescriptor


class TooMuchSource(Exception):
    """A build's files, read from the store, are more than one build job may carry: str() says
    which field and the maximum (a 400)."""


def read(source: Source | None, store: FileStore | None) -> bytes:
    if source is None:
        return b""
    if source.file_id is None:
        return source.text or b""
    assert store is not None  # the request's files are pinned in the store
    return store.read(source.file_id)


@contextlib.contextmanager
def stdin_of(source: Source, store: FileStore | None) -> Iterator[tuple[bytes | None, int | None]]:
    """A test's input as a job takes it: (its text, None) when given inline, else (None, a
    descriptor of the store's file, closed on leaving): the slot reads the file itself."""
    if source.file_id is None:
        yield source.text or b"", None
        return
    assert store is not None  # the request's files are pinned in the store
    fd = store.descriptor(source.file_id)
    try:
        yield None, fd
    finally:
        os.close(fd)


def given(source: Source | None, store: FileStore | None, opened: contextlib.ExitStack) -> bytes | ByDescriptor:
    """A checker's or an interactor's file (a test's input or expected answer) as an exec job
    carries it: its text when given inline (or b"" when absent), else a descriptor of the
    store's file, closed when `opened` closes: kiln-init copies it into the sandbox itself."""
    if source is None or source.file_id is None:
        return read(source, store)
    assert store is not None  # the request's files are pinned in the store
    fd = store.descriptor(source.file_id)
    opened.callback(os.close, fd)
    return ByDescriptor(fd)


def read_build_files(files: tuple[tuple[str, Source], ...], store: FileStore | None, limit: int, field: str) -> tuple[tuple[str, bytes], ...]:
    """A build's files as (name, content), at most `limit` bytes in all (a build job's frame
    carries them together: kiln-init's judge_part_max), else TooMuchSource naming `field`."""
    size = sum(len(s.text or b"") if s.file_id is None else _stored_size(s.file_id, store) for _, s in files)
    if size > limit:
        raise TooMuchSource(f"{field}: {size} bytes in all with the source, above the maximum of {limit} (RUN_JUDGE_INPUT_MAX or RUN_FILE_MAX, the larger)")
    return tuple((name, read(source, store)) for name, source in files)


def _stored_size(file_id: str, store: FileStore | None) -> int:
    assert store is not None
    return store.size(file_id)
