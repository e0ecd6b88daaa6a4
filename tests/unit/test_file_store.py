"""kiln/judge/files.py: the judge's content-addressed file store, on a temporary folder."""

from __future__ import annotations

import hashlib
import os

import pytest

from kiln.judge import files
from kiln.judge.files import FILE_ID, DigestMismatch, FileStore, StoreFull, TooLarge, UnknownFile
from kiln.judge.footprint import Footprint


class Recorder:
    def __init__(self):
        self.events: list[tuple[str, str, dict]] = []

    def info(self, msg, **fields):
        self.events.append(("info", msg, fields))

    def warning(self, msg, **fields):
        self.events.append(("warning", msg, fields))

    def error(self, msg, **fields):
        self.events.append(("error", msg, fields))


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def on_disk(store: FileStore) -> list[str]:
    return sorted(os.listdir(store.folder))


# a footprint of the content's bytes alone: the bound's rules below in bytes; the footprint's
# own tests name theirs (a filesystem of 4 KiB blocks and one inode per 16 KiB, as ext4's default)
BYTES = Footprint(1, 0)
EXT4 = Footprint(4096, 16384)


@pytest.fixture
def make(tmp_path):
    def make(file_max: int = 1 << 20, store_max: int = 1 << 22, footprint: Footprint = BYTES) -> FileStore:
        return FileStore(tmp_path / "store", file_max, store_max, Recorder(), footprint)

    return make


def test_put_open_read_delete(make):
    store = make()
    data = bytes(range(256)) * 4
    stored = store.put(data)
    assert (stored.id, stored.size, stored.created) == (sha(data), len(data), True)
    assert FILE_ID.fullmatch(stored.id)
    hex_ = stored.id.removeprefix("sha256:")
    assert on_disk(store) == [hex_]
    assert (store.folder / hex_).read_bytes() == data
    assert store.put(data).created is False  # content-addressed: the same bytes, the same file
    assert on_disk(store) == [hex_] and store.total == len(data)
    file, size = store.open(stored.id)
    with file:
        assert (file.read(), size) == (data, len(data))
    assert store.read(stored.id) == data and store.size(stored.id) == len(data)
    assert store.path(stored.id) == store.folder / hex_
    assert stored.id in store and store.ids() == [stored.id]
    assert store.delete(stored.id) is True
    assert stored.id not in store and on_disk(store) == [] and store.total == 0
    assert store.delete(stored.id) is False
    with pytest.raises(UnknownFile) as unknown:
        store.open(stored.id)
    assert str(unknown.value) == stored.id
    for lookup in (store.size, store.read, store.path):
        with pytest.raises(UnknownFile):
            lookup(stored.id)


def test_an_empty_file_is_a_file(make):
    store = make()
    stored = store.put(b"")
    assert (stored.id, stored.size, stored.created) == (sha(b""), 0, True)
    assert store.read(stored.id) == b""


def test_an_upload_in_chunks_is_the_same_file(make):
    store = make()
    data = os.urandom(200_000)
    with store.upload() as upload:
        for at in range(0, len(data), 7_000):
            upload.write(data[at : at + 7_000])
        stored = upload.commit()
    assert stored.id == sha(data) and store.read(stored.id) == data
    assert store.put(data).created is False
    assert store.reserved == 0 and [n for n in on_disk(store) if n.startswith(".")] == []


def test_a_file_over_the_limit_is_refused_and_leaves_nothing(make):
    store = make(file_max=10)
    assert store.put(b"x" * 10).size == 10  # exactly the limit is fine
    with store.upload() as upload:
        upload.write(b"y" * 6)
        with pytest.raises(TooLarge):
            upload.write(b"y" * 5)
    assert on_disk(store) == [sha(b"x" * 10).removeprefix("sha256:")]
    assert store.reserved == 0 and store.total == 10


def test_a_file_larger_than_the_whole_store_is_too_large(make):
    store = make(file_max=100, store_max=20)
    assert store.limit == 20
    with pytest.raises(TooLarge):
        store.put(b"z" * 21)
    assert on_disk(store) == []


def test_least_recently_used_files_go_first(make):
    store = make(file_max=10, store_max=30)
    a, b, c = (store.put(bytes([n]) * 10).id for n in b"abc")
    store.open(a)[0].close()  # a use: b is now the least recent
    d = store.put(b"d" * 10).id
    assert store.ids() == [c, a, d] and b not in store
    with store.pinned([c]):  # a judge's use, and a pin
        pass
    e = store.put(b"e" * 10).id
    assert store.ids() == [d, c, e]  # a went: c was used after it
    assert store.total == 30 and len(on_disk(store)) == 3
    assert [fields["file"] for level, msg, fields in store.log.events if msg == "file evicted"] == [b, a]


def test_eviction_never_takes_a_pinned_file(make):
    store = make(file_max=20, store_max=30)
    a, b, c = (store.put(bytes([n]) * 10).id for n in b"abc")
    with store.pinned([a, b]):
        d = store.put(b"d" * 10).id  # a and b are older, but pinned: c goes
        assert set(store.ids()) == {a, b, d}
        with store.pinned([d]):
            with store.upload() as upload, pytest.raises(StoreFull):
                upload.write(b"e" * 10)  # everything is pinned: no room, nothing evicted
            assert set(store.ids()) == {a, b, d} and store.reserved == 0
        e = store.put(b"e" * 10).id  # d unpinned: it goes
        assert set(store.ids()) == {a, b, e}
        with pytest.raises(StoreFull):
            store.put(b"f" * 20)  # e alone frees 10, not 20: nothing is evicted for nothing
        assert set(store.ids()) == {a, b, e}
    assert store.put(b"f" * 20).id in store  # unpinned now: the two least recent go
    assert [n for n in on_disk(store) if n.startswith(".")] == []


def test_uploads_in_progress_count_against_the_bound(make):
    store = make(file_max=30, store_max=30)
    old = store.put(b"o" * 10).id
    first, second = store.upload(), store.upload()
    first.write(b"1" * 15)
    second.write(b"2" * 5)  # 10 + 15 + 5: still fits
    assert old in store and store.reserved == 20
    second.write(b"2" * 5)  # 35 would not: the stored file goes
    assert old not in store and store.reserved == 25
    with pytest.raises(StoreFull):
        first.write(b"1" * 10)  # 35, and nothing left to evict
    first.abort()
    assert store.reserved == 10
    stored = second.commit()
    assert (store.reserved, store.total) == (0, 10) and stored.id == sha(b"2" * 10)


def test_pinned_refuses_an_unknown_id_before_pinning_anything(make):
    store = make(file_max=10, store_max=20)
    a = store.put(b"a" * 10).id
    missing = sha(b"never stored")
    with pytest.raises(UnknownFile) as unknown:
        with store.pinned([a, missing, sha(b"nor this")]):
            pytest.fail("entered")
    assert str(unknown.value) == missing
    store.put(b"b" * 10)
    store.put(b"c" * 10)  # a was not left pinned: it can go
    assert a not in store
    with pytest.raises(UnknownFile):
        with store.pinned(["sha256:" + "A" * 64]):  # not an id at all: unknown too
            pass


def test_a_pinned_file_deleted_stays_readable_until_unpinned(make):
    store = make()
    data = b"tests of a problem\n"
    file_id = store.put(data).id
    path = store.path(file_id)
    with store.pinned([file_id, file_id]):  # twice in one request: one pin
        with store.pinned([file_id]):  # another request
            assert store.delete(file_id) is True
            assert file_id not in store and store.ids() == []
            assert store.delete(file_id) is False  # already deleted, for clients
            with pytest.raises(UnknownFile):
                store.open(file_id)
            with pytest.raises(UnknownFile):
                with store.pinned([file_id]):  # a new judge request cannot use it
                    pass
        assert store.read(file_id) == data and store.size(file_id) == len(data)  # the first still can
        assert store.path(file_id).read_bytes() == data
    assert not path.exists() and store.total == 0
    with pytest.raises(UnknownFile):
        store.read(file_id)


def test_a_deleted_pinned_file_uploaded_again_stays(make):
    store = make()
    file_id = store.put(b"again").id
    with store.pinned([file_id]):
        store.delete(file_id)
        stored = store.put(b"again")
        assert stored.created is True and file_id in store  # for the client it was gone: 201
    assert store.read(file_id) == b"again"


def test_a_restart_rebuilds_the_index_in_order_of_use(make):
    store = make(file_max=10, store_max=40)
    a, b, c = (store.put(bytes([n]) * 10).id for n in b"abc")
    for file_id, when in ((a, 3000), (b, 1000), (c, 2000)):
        os.utime(store.path(file_id), ns=(when * 10**9, when * 10**9))
    again = make(file_max=10, store_max=40)
    assert again.ids() == [b, c, a] and again.total == 30
    again.open(b)[0].close()  # a use is written to the file's mtime
    assert os.stat(again.path(b)).st_mtime_ns > 3000 * 10**9
    third = make(file_max=10, store_max=40)
    assert third.ids() == [c, a, b]
    assert third.read(a) == b"a" * 10
    third.put(b"d" * 10)
    third.put(b"e" * 10)
    assert c not in third and third.ids()[0] == a


def test_a_restart_removes_partial_uploads_and_keeps_strangers(make):
    store = make()
    kept = store.put(b"kept").id
    crashed = store.upload()  # a crash mid-upload: never committed nor aborted
    crashed.write(b"half of a file")
    (store.folder / ".partial-leftover").write_bytes(b"x" * 100)
    (store.folder / "README").write_text("not the store's")
    os.symlink("/etc/passwd", store.folder / ("0" * 64))  # a name like a file's, but a link
    again = make()
    assert again.ids() == [kept] and again.total == 4
    assert on_disk(again) == sorted(["README", "0" * 64, kept.removeprefix("sha256:")])
    info = next(fields for level, msg, fields in again.log.events if msg == "file store")
    assert (info["files"], info["partial_removed"]) == (1, 2)
    assert any(level == "warning" for level, msg, fields in again.log.events)
    with pytest.raises(UnknownFile):
        again.open("sha256:" + "0" * 64)


def test_a_lowered_bound_evicts_at_startup(make):
    store = make(file_max=10, store_max=40)
    ids = [store.put(bytes([n]) * 10).id for n in b"abcd"]
    for n, file_id in enumerate(ids):
        os.utime(store.path(file_id), ns=(n * 10**9, n * 10**9))
    again = make(file_max=10, store_max=25)
    assert again.ids() == ids[2:] and again.total == 20 and len(on_disk(again)) == 2


def test_bytes_that_reach_the_disk_wrong_are_never_stored(make, monkeypatch):
    store = make()
    real = files._write_all

    def torn(fd, data):  # the disk keeps something else than what was received
        real(fd, data[:-1] + bytes([data[-1] ^ 1]))

    monkeypatch.setattr(files, "_write_all", torn)
    with pytest.raises(DigestMismatch):
        store.put(b"what the client sent")
    assert on_disk(store) == [] and store.ids() == [] and store.reserved == 0 and store.total == 0
    assert any(level == "error" for level, msg, fields in store.log.events)
    monkeypatch.setattr(files, "_write_all", real)
    assert store.put(b"what the client sent").id == sha(b"what the client sent")


def test_each_file_is_stored_under_its_own_digest(make):
    store = make()
    for size in (0, 1, 4095, 65536, 65537, 300_000):
        data = os.urandom(size)
        stored = store.put(data)
        assert stored.id == sha(data)
        assert hashlib.sha256(store.path(stored.id).read_bytes()).hexdigest() == stored.id.removeprefix("sha256:")


@pytest.mark.parametrize("text", ["sha256:" + "a" * 64, "sha256:" + "0123456789abcdef" * 4])
def test_file_id_accepts(text):
    assert FILE_ID.fullmatch(text)


@pytest.mark.parametrize("text", ["sha256:" + "A" * 64, "sha256:" + "a" * 63, "sha256:" + "a" * 65, "a" * 64, "sha1:" + "a" * 64, "sha256:" + "g" * 64, "sha256:" + "a" * 63 + "\n"])
def test_file_id_refuses(text):
    assert not FILE_ID.fullmatch(text)


def test_owners_see_only_their_files_and_a_file_goes_with_its_last_owner(make):
    store = make()
    stored = store.put(b"answer\n", owner="a1")
    assert store.put(b"answer\n", owner="b2").created is True  # new to b2: nothing said of a1's
    assert store.put(b"answer\n", owner="b2").created is False
    with pytest.raises(UnknownFile):
        store.open(stored.id, owner="c3")
    with pytest.raises(UnknownFile), store.pinned([stored.id], owner="c3"):
        pass
    assert store.delete(stored.id, owner="c3") is False
    assert store.delete(stored.id, owner="a1") is True and store.open(stored.id, owner="b2")[1] == 7
    again = make()  # the owners are on disk
    assert again.delete(stored.id, owner="a1") is False and again.open(stored.id, owner="b2")[1] == 7
    assert again.delete(stored.id, owner="b2") is True and on_disk(again) == []
    assert list((again.owners / "b2").iterdir()) == []


def test_without_keys_every_client_sees_every_file_and_a_keyed_client_none_of_those(make):
    store = make()
    stored = store.put(b"shared\n")
    assert store.open(stored.id)[1] == 7 and stored.id in store
    with pytest.raises(UnknownFile):
        store.open(stored.id, owner="a1")  # uploaded before keys were configured: nobody's
    assert store.put(b"shared\n", owner="a1").created is True
    assert store.delete(stored.id, owner="a1") is True and on_disk(store) == []


def test_the_bound_counts_whole_blocks_and_inodes_not_bytes(make):
    """2000 uploads of 16 bytes counted 31 KiB: each takes a block and an inode."""
    store = make(store_max=10 * (4096 + 16384), footprint=EXT4)
    files = [store.put(b"sixteen bytes %02d" % n) for n in range(20)]
    assert store.ids() == [f.id for f in files[10:]]  # the ten least recently used went
    assert store.total == 10 * (4096 + 16384) and on_disk(store) == sorted(f.id.removeprefix("sha256:") for f in files[10:])


def test_an_owners_mark_is_an_inode_of_the_store(make):
    store = make(store_max=4 * (4096 + 2 * 16384), footprint=EXT4)
    files = [store.put(b"x" * n, owner="a1") for n in range(1, 7)]
    assert store.ids() == [f.id for f in files[2:]]
    store.put(b"x" * 6, owner="b2")  # a second owner of the newest: room for its upload, then its mark
    assert store.ids() == [f.id for f in files[3:]]
    assert store.total == 2 * (4096 + 2 * 16384) + (4096 + 3 * 16384)


def test_the_footprint_is_rebuilt_the_same_at_startup(make):
    store = make(store_max=1 << 22, footprint=EXT4)
    for n in range(5):
        store.put(b"y" * (5000 * n), owner="a1" if n % 2 else "")
    again = make(store_max=1 << 22, footprint=EXT4)
    assert again.total == store.total == sum(EXT4.charge(5000 * n, 2 if n % 2 else 1) for n in range(5))


def test_an_empty_upload_takes_an_inode_and_finds_no_room_in_a_full_store(make):
    store = make(store_max=4096 + 2 * 16384, footprint=EXT4)
    assert store.put(b"").size == 0 and store.total == 16384
    with store.pinned([sha(b"")]):
        with pytest.raises(StoreFull):
            store.put(b"z", owner="a1")
    assert on_disk(store) == [sha(b"").removeprefix("sha256:")]
    assert store.put(b"z", owner="a1").size == 1 and store.ids() == [sha(b"z")]  # unpinned, it goes


def test_one_files_largest_size_leaves_room_for_its_inodes(make):
    store = make(file_max=1 << 30, store_max=100_000, footprint=EXT4)
    assert store.limit == (100_000 - 2 * 16384) // 4096 * 4096
