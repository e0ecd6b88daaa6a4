"""The Python <-> C contract: every fact that both sides state (record types, constants, ops, job
and result fields and their order, the parts of a job, the outcomes, a layer's entries, the
slots' titles) is owned by Python (kiln/wire/protocol.py, kiln/zygote/recipe.py, kiln/slots.py,
kiln/runtime.py) and must read the same in C: compared as data with the tables `kiln-init
contract` prints. What is read out of the C sources is behaviour no table states (how the
frame's descriptors are checked and copied), as text the code must contain."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import struct
import subprocess
from pathlib import Path

import pytest

from kiln import native, runtime, slots
from kiln.wire import protocol
from kiln.zygote import recipe, start

NATIVE = Path(__file__).resolve().parents[2] / "kiln" / "native"


def c_source(name: str) -> str:
    return (NATIVE / name).read_text()


@pytest.fixture(scope="module")
def contract() -> dict:
    """The tables kiln-init was built with, as it prints them."""
    return json.loads(subprocess.run([str(native.INIT), "contract"], capture_output=True, check=True).stdout)


def test_the_record_types_are_kiln_init_s(contract):
    python = {name: value for name, value in vars(recipe).items() if re.fullmatch(r"K_[A-Z_]+", name)}
    assert contract["record_types"] == python


def test_the_recipe_s_constants_are_the_ones_kiln_init_reads_in_its_order(contract):
    # a constant kiln-init did not read would be a policy the front believes applies and no slot
    # does (as the starvation allowance would be); one out of order, another's value
    assert contract["consts"] == list(recipe.CONSTS)


def test_each_record_type_s_arguments_are_named_as_kiln_init_reads_them(contract):
    """A record's arguments are written by name (recipe._record) and read by the same names
    (kiln.h ARG): a name or an order that differs, or a record type one side lacks, fails here."""
    python = {name: list(recipe.RECORD_ARGS[code]) for name, code in contract["record_types"].items()}
    assert contract["record_args"] == python
    assert set(recipe.RECORD_ARGS) == set(contract["record_types"].values())


def test_a_record_written_with_other_names_than_its_type_s_is_refused():
    with pytest.raises(ValueError, match="RECORD_ARGS names"):
        recipe._record(recipe.K_W_PART, relpath="x", part="solution")
    with pytest.raises(ValueError, match="RECORD_ARGS names"):
        recipe._record(recipe.K_W_RLIMIT, 7, 1)  # fixed arguments go by name
    # the names are the writer's and the reader's; the bytes stay positional
    wire = struct.pack("<II", recipe.K_W_PART, 2) + struct.pack("<I", 8) + b"solution\0" + struct.pack("<I", 1) + b"x\0"
    assert recipe._record(recipe.K_W_PART, part="solution", relpath="x") == wire


def test_stats_and_job_limits_are_the_codes_kiln_init_reads(contract):
    # a K_STAT or K_JOB_LIMIT record says what it is by its position in these
    assert contract["stats"] == list(recipe.STATS)
    assert contract["job_limits"] == list(protocol.JOB_LIMITS)
    # the job header's limits go in the same order
    assert [f.name for f in dataclasses.fields(protocol.Limits)] == list(protocol.JOB_LIMITS)
    assert protocol.Limits(*range(1, 6)).as_list() == [1, 2, 3, 4, 5]


def test_the_ops_and_their_arguments_commands_and_parts_are_kiln_init_s(contract):
    assert contract["ops"] == list(recipe.OPS)
    assert contract["op_args"] == {op: list(args) for op, args in recipe.OP_ARGS.items()}
    with pytest.raises(ValueError, match="OP_ARGS names"):
        recipe._op(recipe.K_FINISH, "a step", "detach", "/x", "/y")
    assert contract["commands"] == list(protocol.COMMANDS)
    assert contract["parts"] == list(protocol.PARTS)


def test_the_job_header_is_read_in_the_order_encode_job_writes_it(contract):
    # kiln.h JOB_KEYS: header.c reads each key with its reader, in this order, then the frame's "blobs"
    assert contract["job_keys"] == list(protocol.JOB_KEYS)
    header, blobs = protocol.encode_job(protocol.Job("python", 1000, (("solution", b"x"),), b"in"))
    assert list(header) == list(protocol.JOB_KEYS) and blobs == [b"x", b"in"]
    header, blobs = protocol.encode_job(protocol.Job("python", 1000, (), command="exec", layer="a" * 64, stdin_file=7))
    assert header["stdin_file"] is True and header["stdin"] is False and blobs == [] and protocol.job_fds(protocol.Job("python", 1, (), stdin_file=7)) == (7,)


def test_a_stdin_file_is_taken_as_the_one_descriptor_of_its_frame_and_checked():
    """kiln-init takes a job's descriptors as protocol.job_fds sends them: two with pipes, one
    with a stdin file, which it checks (a regular file, read-only, within the part maximum) and
    reads from its start."""
    frames = c_source("frames.c")
    take = frames[frames.index("int take_descriptors("):frames.index("void close_file_fds(")]
    assert "job->has_pipes ? 2 : job->has_stdin_file ? 1 : 0, wanted = first + job->nfile_fds" in take
    check = frames[frames.index("static int store_file("):frames.index("int take_descriptors(")]
    assert all(c in check for c in ("S_ISREG(st.st_mode)", "(flags & O_ACCMODE) != O_RDONLY", "st.st_size > r->judge_part_max"))
    assert "lseek(fds[0], 0, SEEK_SET)" in take
    assert "job->has_stdin_file ? job->stdin_fd" in c_source("exec.c")


def test_files_by_descriptor_follow_the_pipes_or_stdin_file_in_the_files_order_and_are_copied_at_explicit_offsets(contract):
    """A checker's or an interactor's files of the store: their indexes in the header's
    file_fds, their descriptors after the pipes (or the stdin file) in the files' order, at most
    FILE_FDS_MAX; kiln-init copies each from offset 0 without using the descriptor's own offset."""
    assert contract["max_file_fds"] == protocol.FILE_FDS_MAX
    files = (("input", protocol.ByDescriptor(9)), ("output", b"out"), ("answer", protocol.ByDescriptor(11)))
    job = protocol.Job("python", 1000, files, command="exec", layer="a" * 64, pipes=(3, 4))
    header, blobs = protocol.encode_job(job)
    assert header["file_fds"] == [0, 2] and header["files"] == ["input", "output", "answer"] and blobs == [b"out"]
    assert protocol.job_fds(job) == (3, 4, 9, 11)
    copy = c_source("files.c")
    copy = copy[copy.index("static int copy_from("):copy.index("static int write_file(")]
    assert "off_t at = 0;" in copy and "copy_file_range(from, &at," in copy and "sendfile(out, from, &at," in copy


def test_a_builds_layer_is_written_as_protocol_reads_it(contract):
    # kiln.h LAYER_HEAD: each field's bytes, big-endian (layer.c put_big_endian), as LAYER_ENTRY's
    assert protocol.LAYER_ENTRY.format[0] == ">"
    assert list(contract["layer_head"].values()) == [struct.calcsize(">" + code) for code in protocol.LAYER_ENTRY.format[1:]]
    assert contract["layer_types"] == [t.decode() for t in protocol.LAYER_TYPES]


def test_the_result_is_written_with_the_keys_decode_result_reads(contract):
    # kiln.h RESULT_FIELDS: one format for every result (send_failure's and send_result_of's)
    assert tuple(contract["result_fields"]) == protocol.RESULT_KEYS


def test_the_outcomes_are_result_c_s_in_their_precedence(contract):
    assert contract["outcomes"] == list(protocol.OUTCOMES)


def test_every_title_kiln_init_writes_is_one_kiln_slots_reads(contract):
    """kiln.slots owns the titles' grammar (`ps`, `kiln slots` and the tests read slots by them);
    kiln-init writes them with its TITLES' printf formats (rendered here with Python's %, which
    reads C's), and its busy title's age every TITLE_EVERY_S."""
    titles = contract["titles"]
    assert set(titles) == {"WARMING", "WARM", "BUSY", "AGED", "TEST_INIT"}, "a new title: render it below"
    busy = titles["BUSY"] % (3, "python")
    rendered = [titles["WARMING"] % 3, titles["WARM"] % (3, "", ""), titles["WARM"] % (3, " ", "python"), busy, titles["AGED"] % (busy, 12.5)]
    for title in rendered:
        assert slots.TITLE.fullmatch(title), title
    # a later judge test's init is no child of the zygote, and no slot: kiln slots never counts it
    assert not slots.TITLE.match(titles["TEST_INIT"] % 3)
    assert contract["title_every_s"] == slots.TITLE_EVERY_S


def test_the_shell_kiln_init_reads_statuses_of_is_the_one_task_argv_runs(contract):
    assert contract["task_shell"] == runtime.SHELL[0]


HOLDING_HARNESSES = (
    "python/check/harness.py",
    "js/check/harness.js",
    "ruby/check/harness_calls.rb",
    "php/check/harness.php",
    "elixir/check/harness.ex",
    "clojure/runner/src/kiln/harness.clj",
)


def test_the_ready_frames_root_image_key_is_kiln_h_s(contract):
    """The key by which a warming slot says it built its index's root image (its namespace rides
    with the ready frame): the zygote keeps that image only under this name."""
    assert contract["ready_root_image"] == protocol.READY_ROOT_IMAGE == "root_image"


def test_the_held_stdout_is_kiln_h_s_and_the_harnesses_name_it(contract):
    assert contract["held_stdout"] == runtime.HELD_STDOUT
    langs = NATIVE.parents[1] / "langs"
    for harness in HOLDING_HARNESSES:
        assert f"/sandbox/{runtime.HELD_STDOUT}" in (langs / harness).read_text(), harness


def test_a_recipe_whose_constants_kiln_init_does_not_know_is_refused_saying_what_to_do():
    """A kiln-init older or newer than the zygote reading constants by position would take one
    for another: it refuses the recipe instead."""
    consts = recipe._record(recipe.K_CONSTS, *range(len(recipe.CONSTS) - 1))
    fd = recipe.sealed_memfd(recipe.MAGIC + consts)
    try:
        done = subprocess.run([str(native.INIT), "check"], env={"KILN_RECIPE": str(fd)}, pass_fds=(fd,), capture_output=True, text=True, stdin=subprocess.DEVNULL)
    finally:
        os.close(fd)
    assert done.returncode == 70 and f"{len(recipe.CONSTS) - 1} constants where kiln-init reads {len(recipe.CONSTS)}" in done.stderr, done
    assert "make -C kiln/native" in done.stderr


def test_the_start_s_variables_are_the_ones_kiln_init_reads(contract):
    assert sorted(contract["start"]) == sorted(start.every_variable())
    env = start.Start(5, 6, 7, lower=(8, 9), prestart="python").environment()
    assert env == {"KILN_SOCK": "5", "KILN_ZYGOTE": "6", "KILN_RECIPE": "7", "KILN_CG_DIRS": "", "KILN_CG_PROCS": "", "KILN_LOWER_WORKSPACES": "8", "KILN_LOWER_LAYERS": "9", "KILN_PRESTART": "python"}


def test_a_record_with_other_arguments_than_its_shape_s_is_refused_saying_what_to_do():
    """kiln-init reads a record's arguments by name without counting them: a record of another
    arity (a kiln-init older or newer than the zygote), or of a type it does not know, is refused
    when the recipe is loaded."""
    consts = recipe._record(recipe.K_CONSTS, *range(len(recipe.CONSTS)))
    short_part = struct.pack("<II", recipe.K_W_PART, 1) + struct.pack("<I", 8) + b"solution\0"
    for bad in (short_part, struct.pack("<II", 99, 0)):
        fd = recipe.sealed_memfd(recipe.MAGIC + consts + bad)
        try:
            done = subprocess.run([str(native.INIT), "check"], env={"KILN_RECIPE": str(fd)}, pass_fds=(fd,), capture_output=True, text=True, stdin=subprocess.DEVNULL)
        finally:
            os.close(fd)
        assert done.returncode == 70 and "recipe: record 1 (type" in done.stderr and "make -C kiln/native" in done.stderr, done
