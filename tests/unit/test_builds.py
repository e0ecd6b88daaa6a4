"""The judge's builds (kiln/judge/builds.py): a build job's layer written as a folder every slot
can read, the build cache's hit, miss and eviction by least recent use within its bound, never
removing a build in use; with the cache off a build lives as long as its request."""

from __future__ import annotations

import os
import stat

import pytest

from kiln.judge.answer import CompileResult
from kiln.judge.builds import ENTRY_OVERHEAD, Builds, NoRoom, not_runnable
from kiln.log import Log
from kiln.run.stats import Stats
from kiln.wire.protocol import LAYER_ENTRY, LayerEntry, ProtocolError, read_layer


def layer(*entries: tuple[bytes, str, bytes, int]) -> list[LayerEntry]:
    """A build job's layer of these entries, as the judge reads it before Builds.put."""
    return read_layer(packed(*entries))


def packed(*entries: tuple[bytes, str, bytes, int]) -> bytes:
    return b"".join(LAYER_ENTRY.pack(kind, mode, len(path.encode()), len(data)) + path.encode() + data for kind, path, data, mode in entries)


BINARY_ENTRIES = ((b"d", "judge", b"", 0o700), (b"f", "judge/main", b"\x7fELF" + b"x" * 1000, 0o4700), (b"l", "judge/link", b"main", 0o777), (b"f", "judge/notes.txt", b"hi", 0o600))
BINARY = layer(*BINARY_ENTRIES)
COMPILE = CompileResult(0, "", "", False, Stats("exited", 1.0, 1.0, 0, None))


@pytest.fixture
def builds(tmp_path):
    return Builds(str(tmp_path), 1 << 20, Log("logfmt", False))


def test_a_layer_becomes_a_folder_every_slot_reads_and_none_can_run_setuid(builds, tmp_path):
    build = builds.put("a" * 64, BINARY, COMPILE)
    folder = tmp_path / build.name
    assert build.name == "a" * 64 and folder.is_dir()
    main = folder / "judge" / "main"
    assert main.read_bytes().startswith(b"\x7fELF")
    assert stat.S_IMODE(main.stat().st_mode) == 0o755  # executable kept, setuid dropped, readable by all
    assert stat.S_IMODE((folder / "judge" / "notes.txt").stat().st_mode) == 0o644
    assert stat.S_IMODE((folder / "judge").stat().st_mode) == 0o755 and stat.S_IMODE(folder.stat().st_mode) == 0o755
    assert os.readlink(folder / "judge" / "link") == "main"
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".partial")]


def test_the_cache_hits_and_misses_by_key(builds):
    key = Builds.key("cpp", "g++ 12", ("g++", "main.cpp"), (("main.cpp", b"int main(){}"),))
    assert builds.get(key) is None
    build = builds.put(key, BINARY, COMPILE)
    assert builds.get(key) is build and build.users == 2  # each caller holds it
    assert key != Builds.key("cpp", "g++ 13", ("g++", "main.cpp"), (("main.cpp", b"int main(){}"),))
    assert key != Builds.key("cpp", "g++ 12", ("g++", "main.cpp"), (("main.cpp", b"int main(){ }"),))
    assert key == Builds.key("cpp", "g++ 12", ("g++", "main.cpp"), (("main.cpp", b"int main(){}"),))
    # the files' order does not matter; where one file ends and the next begins does
    assert Builds.key("c", "", (), (("a", b"1"), ("b", b"2"))) == Builds.key("c", "", (), (("b", b"2"), ("a", b"1")))
    assert Builds.key("c", "", (), (("a", b"1b"),)) != Builds.key("c", "", (), (("a", b"1"), ("b", b"")))


def test_the_least_recently_used_build_goes_first_never_one_in_use(tmp_path):
    one = len(packed(*BINARY_ENTRIES)) + 4 * ENTRY_OVERHEAD  # about what one build of BINARY counts
    builds = Builds(str(tmp_path), 2 * one + 10, Log("logfmt", False))
    with builds.held(builds.put("1" * 64, BINARY, COMPILE)) as first:
        pass
    second = builds.put("2" * 64, BINARY, COMPILE)
    with builds.held(builds.get("1" * 64)):  # the first is now the more recently used
        pass
    with builds.held(second):
        with builds.held(builds.put("3" * 64, BINARY, COMPILE)) as third:  # over the bound: the LRU one not in use goes
            assert "2" * 64 in builds.index and (tmp_path / second.name).is_dir()
            assert "1" * 64 not in builds.index and not (tmp_path / first.name).exists()
    assert builds.index["3" * 64] is third


def test_every_build_on_disk_counts_and_one_that_finds_no_room_is_refused_never_evicted_in_use(tmp_path):
    one = len(packed(*BINARY_ENTRIES)) + 4 * ENTRY_OVERHEAD
    builds = Builds(str(tmp_path), one + 10, Log("logfmt", False))
    other = builds.put("1" * 64, BINARY, COMPILE)  # another client's request holds it
    with pytest.raises(NoRoom, match="builds in use hold"):
        builds.put("2" * 64, BINARY, COMPILE)
    assert (tmp_path / other.name).is_dir() and len(os.listdir(tmp_path)) == 1
    with builds.held(other):
        pass
    with builds.held(builds.put("2" * 64, BINARY, COMPILE)) as mine:  # the unused one makes room
        assert "1" * 64 not in builds.index and (tmp_path / mine.name).is_dir()
    assert builds.size == builds.index["2" * 64].size <= builds.max_bytes


def test_a_private_build_counts_until_its_request_ends(tmp_path):
    one = len(packed(*BINARY_ENTRIES)) + 4 * ENTRY_OVERHEAD
    builds = Builds(str(tmp_path), 3 * one, Log("logfmt", False))
    with builds.held(builds.put("1" * 64, BINARY, COMPILE)):
        with builds.held(builds.put("1" * 64, BINARY, COMPILE)) as private:  # the key is cached: this one is the request's own
            assert not private.cached and builds.size == 2 * private.size
        assert builds.size == private.size and not (tmp_path / private.name).exists()


def test_with_the_cache_off_a_build_lives_as_long_as_its_request(tmp_path):
    builds = Builds(str(tmp_path), 0, Log("logfmt", False))
    build = builds.put("4" * 64, BINARY, COMPILE)
    assert build.name != "4" * 64 and builds.get("4" * 64) is None
    with builds.held(build):
        assert (tmp_path / build.name).is_dir()
    assert not (tmp_path / build.name).exists()


def test_a_malformed_layer_writes_nothing(builds, tmp_path):
    with pytest.raises(ProtocolError):
        builds.put("5" * 64, layer((b"f", "../escape", b"x", 0o644)), COMPILE)
    with pytest.raises(ProtocolError):
        builds.put("6" * 64, layer((b"d", "d", b"", 0o755), (b"d", "d", b"", 0o755)), COMPILE)  # made twice
    assert os.listdir(tmp_path) == [] and not (tmp_path.parent / "escape").exists()


# -- the judge's rule: a build that exits 0 and leaves nothing runnable is CE (not_runnable) ----


@pytest.mark.parametrize(
    ("exec_argv", "entries", "reason"),
    [
        (("judge/main",), BINARY_ENTRIES, None),  # an executable the build made
        (("/usr/bin/python3", "-B", "judge/main.py"), (), None),  # the toolchain's program: the build checks
        (("shipped/run",), (), None),  # an executable of the workspace below the build
        (("judge/main",), ((b"d", "judge", b"", 0o755),), "judge/main does not exist"),
        (("judge/main",), ((b"d", "judge", b"", 0o755), (b"f", "judge/main", b"!<arch>\n", 0o644)), "judge/main is not executable"),  # Go's archive of a package not named main
        (("judge/main",), ((b"d", "judge", b"", 0o755), (b"d", "judge/main", b"", 0o755)), "judge/main is a directory"),
        (("judge/main",), ((b"d", "judge", b"", 0o755), (b"l", "judge/main", b"/bin/sh", 0o777)), "judge/main is a symbolic link"),
        (("shipped/data",), (), "shipped/data does not exist"),
    ],
)
def test_a_build_that_left_no_program_for_the_exec_command_says_why(tmp_path, exec_argv, entries, reason):
    (tmp_path / "shipped").mkdir()
    (tmp_path / "shipped" / "run").write_text("#!/bin/sh\n")
    (tmp_path / "shipped" / "run").chmod(0o755)
    said = not_runnable(exec_argv, layer(*entries), str(tmp_path))
    assert (said is None) if reason is None else (said is not None and reason in said and said.startswith("kiln: the build exited 0")), said
