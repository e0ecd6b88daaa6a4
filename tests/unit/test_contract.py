"""The Python <-> C contract, checked against the C sources: every fact that both sides state
(record types, job and result fields and their order, the parts of a job, the outcomes) is owned
by Python (kiln/zygote/protocol.py, kiln/zygote/recipe.py) and must read the same in C."""

from __future__ import annotations

import re
from pathlib import Path

from kiln import runtime, slots
from kiln.zygote import protocol, recipe

NATIVE = Path(__file__).resolve().parents[2] / "kiln" / "native"


def c_source(name: str) -> str:
    return (NATIVE / name).read_text()


def test_record_types_are_kiln_h_s():
    enum = dict((name, int(value)) for name, value in re.findall(r"^\s*(K_[A-Z_]+)\s*=\s*(\d+),", c_source("kiln.h"), re.MULTILINE))
    python = {name: value for name, value in vars(recipe).items() if re.fullmatch(r"K_[A-Z_]+", name)}
    assert enum == python


def test_the_job_header_is_read_in_the_order_encode_job_writes_it():
    frames = c_source("frames.c")
    parse = frames[frames.index("int parse_job("):]
    keys = re.findall(r'\\"([a-z_]+)\\":', parse[: parse.index("job->workload_rec = ")])
    assert keys == [*protocol.JOB_KEYS, "blobs"]
    header, blobs = protocol.encode_job(protocol.Job("python", 1000, (("solution", b"x"),), b"in"))
    assert list(header) == list(protocol.JOB_KEYS) and blobs == [b"x", b"in"]
    header, blobs = protocol.encode_job(protocol.Job("python", 1000, (), command="exec", layer="a" * 64, stdin_file=7))
    assert header["stdin_file"] is True and header["stdin"] is False and blobs == [] and protocol.job_fds(protocol.Job("python", 1, (), stdin_file=7)) == (7,)


def test_a_stdin_file_is_taken_as_the_one_descriptor_of_its_frame_and_checked():
    """kiln-init takes a job's descriptors as protocol.job_fds sends them: two with pipes, one
    with a stdin file, which it checks (a regular file, read-only, within the part maximum) and
    reads from its start."""
    init = c_source("init.c")
    take = init[init.index("static int take_descriptors("):init.index("/* one frame, checked")]
    assert "job->has_pipes ? 2 : job->has_stdin_file ? 1 : 0" in take
    assert all(check in take for check in ("S_ISREG(st.st_mode)", "O_ACCMODE) != O_RDONLY", "st.st_size > s->recipe.judge_part_max", "lseek(fds[0], 0, SEEK_SET)"))
    assert "job->has_stdin_file ? job->stdin_fd" in init


def test_the_commands_of_a_job_are_frames_c_s():
    [names] = re.findall(r"COMMAND_NAMES\[\] = \{([^}]*)\}", c_source("frames.c"))
    assert tuple(re.findall(r'"([a-z]+)"', names)) == protocol.COMMANDS


def test_a_builds_layer_is_written_as_protocol_reads_it():
    layer = c_source("layer.c")
    assert set(re.findall(r"entry\(l, '(\w)'", layer)) == {t.decode() for t in protocol.LAYER_TYPES}
    assert protocol.LAYER_ENTRY.format == ">cHHI" and "htons(mode & 0777), len16 = htons(path_len)" in layer and "htonl(size)" in layer


def test_the_parts_of_a_job_are_frames_c_s():
    [names] = re.findall(r"PART_NAMES\[\] = \{([^}]*)\}", c_source("frames.c"))
    assert tuple(re.findall(r'"([a-z]+)"', names)) == protocol.PARTS


def test_the_result_is_written_with_the_keys_decode_result_reads():
    result = c_source("result.c")
    for writer in (result[result.index("void send_failure("):result.index("/* timed_out >")], result[result.index("void send_result_of("):]):
        assert tuple(re.findall(r'\\"([a-z_]+)\\":', writer)) == protocol.RESULT_KEYS


def test_the_outcomes_are_result_c_s():
    result = c_source("result.c")
    written = set(re.findall(r'outcome = "([a-z_]+)"', result)) | set(re.findall(r'\\"outcome\\":\\"([a-z_]+)\\"', result))
    assert written == set(protocol.OUTCOMES)


def test_every_title_kiln_init_writes_is_one_kiln_slots_reads():
    """kiln.slots owns the titles' grammar (`ps`, `kiln slots` and the tests read slots by them);
    kiln-init writes them with printf formats, and its busy title's age every TITLE_EVERY_S."""
    init, supervise = c_source("init.c"), c_source("supervise.c")
    formats = re.findall(r'"(kiln: slot %ld[^"]*)"', init)
    assert formats == ["kiln: slot %ld warm%s%s", "kiln: slot %ld busy %s", "kiln: slot %ld warming"]
    samples = ["kiln: slot 3 warm", "kiln: slot 3 warm python", "kiln: slot 3 busy python", "kiln: slot 3 warming"]
    aged = re.search(r'set_title\(s, "%s %\.1fs", title', supervise) and "kiln: slot 3 busy python 12.5s"
    for title in [*samples, aged]:
        assert slots.TITLE.fullmatch(title), title
    [every] = re.findall(r"#define TITLE_EVERY_S ([0-9.]+)", supervise)
    assert float(every) == slots.TITLE_EVERY_S


def test_the_ops_are_kiln_h_s():
    [body] = re.findall(r"enum op \{([^}]*)\}", c_source("kiln.h"))
    names = [name.split("=")[0].strip() for name in body.split(",")]
    assert names == [f"OP_{op.upper()}" for op in recipe.OPS] and "OP_MOUNT = 1" in body
    mounts = c_source("mounts.c")
    assert all(f'[OP_{op.upper()}] = "{op}"' in mounts for op in recipe.OPS)


def test_the_shell_kiln_init_reads_statuses_of_is_the_one_task_argv_runs():
    [shell] = re.findall(r'#define TASK_SHELL "([^"]+)"', c_source("kiln.h"))
    assert shell == runtime.SHELL[0]


def test_every_constant_the_recipe_carries_is_one_kiln_init_reads():
    """A constant kiln-init does not read is a policy the front believes applies and no slot
    does (as the starvation allowance would be)."""
    written = set(re.findall(r'_record\(K_CONST, "([a-z_]+)"', Path(recipe.__file__).read_text()))
    [body] = re.findall(r"static void read_consts\(struct recipe \*r\) \{(.*?)\n\}", c_source("recipe.c"), re.DOTALL)
    read = set(re.findall(r'!strcmp\(name, "([a-z_]+)"\)', body))
    assert "starved_max_times" in written and written == read


HOLDING_HARNESSES = (
    "python/check/harness.py",
    "js/check/harness.js",
    "ruby/check/harness_calls.rb",
    "php/check/harness.php",
    "elixir/check/harness.ex",
    "clojure/runner/src/kiln/harness.clj",
)


def test_the_held_stdout_is_kiln_h_s_and_the_harnesses_name_it():
    assert re.findall(r'#define HELD_STDOUT "([^"]+)"', c_source("kiln.h")) == [runtime.HELD_STDOUT]
    langs = NATIVE.parents[1] / "langs"
    for harness in HOLDING_HARNESSES:
        assert f"/sandbox/{runtime.HELD_STDOUT}" in (langs / harness).read_text(), harness
