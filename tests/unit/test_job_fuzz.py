"""Garbage never crashes the root side: whatever frame arrives on a slot's socket, the slot's init
(kiln-init) either takes it as a job or answers one error frame (issue 7, "Fuzzing").

kiln-init's own reading code runs in its check mode (`kiln-init check`: one frame on stdin,
answered with what it parsed or with the error a slot would send), on:
- the front's job frames (protocol.encode of api.py's header) for valid jobs and for near
  misses of them: the answer must be exactly what the rules below say;
- raw frames with lying sizes, truncated bodies and non-JSON headers: one answer, and a job only
  for a frame that is well formed and valid by the rules;
- the descriptors a frame carries (pipes, a stdin file, files by descriptor), real ones of each
  kind: too many, too few, not a regular file, not read-only, too large.
"""

from __future__ import annotations

import array
import json
import os
import re
import socket
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kiln import config, langs, native, runtime
from kiln.sandbox import plan
from kiln.sandbox.cgroups import NoSlotCgroup
from kiln.wire import protocol
from kiln.zygote import recipe

REPO = Path(__file__).resolve().parents[2]
INPUT_MAX = 1024
JUDGE_INPUT_MAX = 2048
TIMEOUT_MAX_MS = 10_000
OUTPUT_MAX = 4096
FILE_PARTS = protocol.PARTS
FRONT_KEYS = list(protocol.JOB_KEYS)  # protocol.encode_job's header, in its order
# the kinds of descriptor a frame may carry, each made afresh for a check (opened()): only
# "file" is a store's file as kiln-init takes it; a pipe is what an interactive test's pipes are
DESCRIPTOR_KINDS = ("file", "pipe", "big", "dir", "write-only")
MAX_FRAME_FDS = protocol.FILE_FDS_MAX + 3  # what kiln-init receives with a frame (more are dropped)


@pytest.fixture(scope="module")
def rt():
    settings = {"RUN_INPUT_MAX": str(INPUT_MAX), "RUN_JUDGE_INPUT_MAX": str(JUDGE_INPUT_MAX), "RUN_FILE_MAX": str(INPUT_MAX), "RUN_TIMEOUT_MAX": f"{TIMEOUT_MAX_MS}ms", "RUN_OUTPUT_MAX": str(OUTPUT_MAX)}
    built = runtime.build(config.load(settings, REPO))
    assert "python" in built.workloads
    return built


@pytest.fixture(scope="module")
def recipe_fd(rt):
    root = plan.root_plan(uid=10001, gid=10001, host_paths=rt.host_paths, workspaces=str(rt.config.workspace), tmp_size=1 << 20, tmp_inodes=64, layers="/run/x/layers")
    fd = recipe.sealed_memfd(recipe.compile_recipe(0, root, rt, NoSlotCgroup("fuzz")))
    yield fd
    os.close(fd)


@pytest.fixture(scope="module")
def descriptor_files(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("descriptors")
    (folder / "file").write_bytes(b"1 2\n")
    (folder / "big").write_bytes(b"x" * (JUDGE_INPUT_MAX + 1))
    return folder


def opened(kinds, folder: Path) -> list[int]:
    """A descriptor of each kind, as DESCRIPTOR_KINDS names them; the caller closes them."""
    fds = []
    for kind in kinds:
        if kind == "pipe":
            read_end, write_end = os.pipe()
            os.close(write_end)
            fds.append(read_end)
        else:
            path, flags = {"file": ("file", os.O_RDONLY), "big": ("big", os.O_RDONLY), "dir": (".", os.O_RDONLY), "write-only": ("file", os.O_WRONLY)}[kind]
            fds.append(os.open(folder / path, flags | os.O_CLOEXEC))
    return fds


def native_check(frame: bytes, recipe_fd: int, prestart: str | None = None, fds: list[int] | tuple[int, ...] = ()) -> list[dict]:
    """kiln-init's answers to `frame` with `fds` on its first byte (of a slot prestarted for
    `prestart`, if given); it must exit 0 whatever came."""
    ours, theirs = socket.socketpair()
    env = {"KILN_RECIPE": str(recipe_fd), **({"KILN_PRESTART": prestart} if prestart else {})}
    with ours:
        proc = subprocess.Popen([str(native.INIT), "check"], stdin=theirs, env=env, pass_fds=(recipe_fd,))
        theirs.close()
        replies = []
        try:
            if fds and frame:  # as protocol.send_frame sends them
                sent = ours.sendmsg([frame], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
                frame = frame[sent:]
            ours.sendall(frame)  # a slot stops reading after its one frame
            ours.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # it refused the frame before its end: its answer is still queued for us
        try:
            while (reply := protocol.recv_frame(ours, 1 << 20)) is not None:
                replies.append(reply[0])
        except ConnectionResetError:  # it closed with our frame's rest unread, after its answer
            pass
    assert proc.wait(10) == 0
    return replies


FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")
LAYER = re.compile(r"[0-9a-f]{64}")


def files_verdict(command: str, names, has_client_harness: bool) -> bool:
    """A test's parts (each at most once, the solution, the client harness
    exactly when the language has one), a build's file names (distinct, at least one, at most 65), an exec job's (its command's
    arguments: distinct file names, at most 65)."""
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
        return False
    if command in ("build", "exec"):
        return (command == "exec" or len(names) > 0) and len(names) <= 65 and all(FILE_NAME.fullmatch(n) for n in names)
    return all(n in FILE_PARTS for n in names) and "solution" in names and has_client_harness == ("client_harness" in names)


def limits_verdict(limits, workload) -> bool:
    if not isinstance(limits, list) or len(limits) != 5 or not all(type(n) is int and 0 <= n < 10**15 for n in limits):
        return False
    cpu_ms, memory, pids, output, _address_space = limits  # any address space: RLIMIT_AS only lowers
    return cpu_ms <= TIMEOUT_MAX_MS and memory <= workload.memory_max and pids <= workload.pids_max and output <= OUTPUT_MAX


def file_fds_verdict(file_fds, command: str, parts) -> bool:
    """The files whose content comes as a descriptor: indexes of the job's files, increasing, at
    most FILE_FDS_MAX, of an exec job only."""
    if not isinstance(file_fds, list) or not all(type(i) is int and 0 <= i < 10**15 for i in file_fds):
        return False
    indexes_fit = file_fds == sorted(set(file_fds)) and all(i < len(parts) for i in file_fds) and len(file_fds) <= protocol.FILE_FDS_MAX
    return indexes_fit and (not file_fds or command == "exec")


def descriptors_verdict(kinds, pipes: bool, stdin_file: bool, file_fds: list) -> bool:
    """Exactly the frame's: two pipes (any kind), or a stdin file, then one for each file by
    descriptor; a stdin file and a file by descriptor each a regular file open for reading only
    within the part maximum."""
    first = 2 if pipes else 1 if stdin_file else 0
    kinds = list(kinds)[:MAX_FRAME_FDS]
    return len(kinds) == first + len(file_fds) and all(kind == "file" for kind in kinds[2 if pipes else 0 :])


def verdict(header: dict, blobs: list[bytes], rt, descriptors=()) -> dict | None:
    """The rules: what kiln-init must answer for this job carrying these kinds of descriptor,
    None for an error frame. The header is taken only in the one form the front writes."""
    if list(header) != FRONT_KEYS or header["op"] != "job":
        return None
    slug, command, timeout_ms, limits, layer = header["slug"], header["command"], header["timeout_ms"], header["limits"], header["layer"]
    parts, stdin, pipes, stdin_file, file_fds = header["files"], header["stdin"], header["pipes"], header["stdin_file"], header["file_fds"]
    if not isinstance(slug, str) or slug not in rt.workloads or command not in protocol.COMMANDS:
        return None
    if type(timeout_ms) is not int or not 0 < timeout_ms <= TIMEOUT_MAX_MS:
        return None
    if not limits_verdict(limits, rt.workloads[slug]) or not isinstance(layer, str) or (command == "exec") != bool(LAYER.fullmatch(layer)):
        return None
    if layer and command != "exec":
        return None
    if not files_verdict(command, parts, rt.workloads[slug].language.has_client_harness) or not file_fds_verdict(file_fds, command, parts):
        return None
    blob_max = INPUT_MAX if command == "test" else JUDGE_INPUT_MAX
    if type(stdin) is not bool or (stdin and command == "build") or len(blobs) != len(parts) - len(file_fds) + stdin or any(len(b) > blob_max for b in blobs):
        return None
    if type(pipes) is not bool or (pipes and (command != "exec" or stdin)):
        return None
    if type(stdin_file) is not bool or (stdin_file and (command != "exec" or stdin or pipes)):
        return None
    if not descriptors_verdict(descriptors, pipes, stdin_file, file_fds):
        return None
    return {"op": "job", "slug": slug, "command": command, "timeout_ms": timeout_ms, "limits": limits, "layer": layer, "stdin": stdin, "pipes": pipes, "stdin_file": stdin_file, "file_fds": file_fds, "files": parts}


def check_front_frame(header: dict, blobs: list[bytes], descriptors, rt, recipe_fd: int, folder: Path) -> dict | None:
    try:
        frame = protocol.encode(header, blobs)
    except UnicodeEncodeError:
        return None  # a lone surrogate: nothing the front can write (raw frames carry them escaped)
    fds = opened(descriptors, folder)
    try:
        [reply] = native_check(frame, recipe_fd, fds=fds)
    finally:
        for fd in fds:
            os.close(fd)
    expected = verdict(header, blobs, rt, descriptors)
    if expected is None:
        assert reply["op"] == "error" and isinstance(reply["error"], str) and reply["error"], reply
    else:
        assert reply == expected
    return reply


# --- strategies ----------------------------------------------------------------------------

# JSON text may carry anything a decoder accepts: lone surrogates (as \ud800 escapes), NaN and
# Infinity (Python's json reads them), integers far beyond 64 bits.
text = st.text(st.characters(exclude_categories=()), max_size=12)
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | text
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4), max_leaves=10)

SERVED_HINTS = ("python", "js", "cpp", "java", "golang", "rust")  # the rt fixture decides which are served
slugs = st.sampled_from(sorted(langs.LANGUAGES)) | st.sampled_from(SERVED_HINTS) | st.just("") | st.just("Python") | json_values
timeouts = (
    st.integers(-2, 2)
    | st.integers(TIMEOUT_MAX_MS - 2, TIMEOUT_MAX_MS + 2)
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True)
    | st.booleans()
    | st.just("1000")
    | json_values
)
parts = st.sampled_from(FILE_PARTS) | st.sampled_from(["../client_harness", "solution ", "Solution", "stdin", ""]) | scalars
file_names = st.sampled_from(["main.py", "Main.java", "a-b.h", "x_1", "-a", ".hidden", "a/b", "..", "é.py", "A" * 100, "A" * 101])
file_lists = st.lists(st.sampled_from(FILE_PARTS), max_size=4) | st.lists(parts, max_size=5) | st.lists(file_names, max_size=4) | json_values
stdin_flags = st.booleans() | json_values
commands = st.sampled_from(protocol.COMMANDS) | st.sampled_from(["Test", "run", ""]) | json_values
limit_values = st.integers(0, 3) | st.integers(OUTPUT_MAX - 1, OUTPUT_MAX + 1) | st.integers(TIMEOUT_MAX_MS - 1, TIMEOUT_MAX_MS + 1) | st.integers(-1, 2**70) | st.floats() | json_values
limit_lists = st.lists(limit_values, min_size=5, max_size=5) | st.lists(st.integers(0, 10), max_size=6) | json_values
layers = st.just("") | st.just("a" * 64) | st.just("A" * 64) | st.just("a" * 63) | st.just("../" + "a" * 61) | text | json_values

file_fd_lists = st.lists(st.integers(0, 3), max_size=3) | st.lists(st.integers(-1, 6), max_size=6) | json_values
descriptor_lists = st.lists(st.sampled_from(DESCRIPTOR_KINDS), max_size=4) | st.lists(st.just("file"), min_size=MAX_FRAME_FDS - 1, max_size=MAX_FRAME_FDS + 2)
headers = st.builds(
    lambda known, extra: {**extra, **known},
    st.fixed_dictionaries({}, optional={"op": st.just("job") | json_values, "slug": slugs, "command": commands, "timeout_ms": timeouts, "limits": limit_lists, "layer": layers, "files": file_lists, "stdin": stdin_flags, "pipes": stdin_flags, "stdin_file": stdin_flags, "file_fds": file_fd_lists}),
    st.dictionaries(text, json_values, max_size=3),
)
blob = st.binary(max_size=24) | st.integers(INPUT_MAX - 1, INPUT_MAX + 1).map(lambda n: b"x" * n)
blob_lists = st.lists(blob, max_size=5)


@st.composite
def valid_jobs(draw, served: tuple[str, ...], rt=None):
    """Well-formed jobs for the served languages, as the front writes them."""
    slug = draw(st.sampled_from(served))
    command = draw(st.sampled_from(protocol.COMMANDS))
    if command == "test":
        has_client_harness = langs.LANGUAGES[slug].has_client_harness
        names = draw(st.permutations(["solution", *(["client_harness"] if has_client_harness else []), *draw(st.lists(st.just("asserts"), max_size=1))]))
    else:
        names = draw(st.lists(st.from_regex(FILE_NAME, fullmatch=True), min_size=command == "build", max_size=3, unique=True))
    stdin = command != "build" and draw(st.booleans())
    limits = [draw(st.integers(0, TIMEOUT_MAX_MS)), draw(st.integers(0, 16 << 20)), draw(st.integers(0, 8)), draw(st.integers(0, OUTPUT_MAX)), draw(st.integers(0, 1 << 30))]
    layer = draw(st.from_regex(LAYER, fullmatch=True)) if command == "exec" else ""
    pipes = command == "exec" and not stdin and draw(st.booleans())
    stdin_file = command == "exec" and not stdin and not pipes and draw(st.booleans())
    file_fds = sorted(draw(st.sets(st.integers(0, len(names) - 1), max_size=protocol.FILE_FDS_MAX))) if command == "exec" and names else []
    # an exec job's file given back: one of its files, named in the form the front writes
    give_back = draw(st.sampled_from(["", *(n for n in names if re.fullmatch(r"[a-z0-9_+-]+", n))])) if command == "exec" else ""
    header = {"op": "job", "slug": slug, "command": command, "timeout_ms": draw(st.integers(1, TIMEOUT_MAX_MS)), "limits": limits, "layer": layer, "files": names, "stdin": stdin, "pipes": pipes, "stdin_file": stdin_file, "file_fds": file_fds, "give_back": give_back}
    blob_max = INPUT_MAX if command == "test" else JUDGE_INPUT_MAX
    count = len(names) - len(file_fds) + stdin
    descriptors = ["pipe", "pipe"] if pipes else ["file"] if stdin_file else []
    return header, draw(st.lists(st.binary(max_size=blob_max), min_size=count, max_size=count)), descriptors + ["file"] * len(file_fds)


@st.composite
def near_misses(draw, served: tuple[str, ...]):
    """A valid job with one thing wrong, so that every rule gets its turn: the slug, the timeout,
    the file parts (any subset or repeat), the stdin flag, the blob count, a blob's size, the
    files by descriptor, the descriptors (one more, one fewer, one of another file type)."""
    header, blobs, descriptors = draw(valid_jobs(served))
    fault = draw(st.sampled_from(["slug", "command", "timeout_ms", "limits", "layer", "files", "stdin", "pipes", "stdin_file", "file_fds", "descriptors", "count", "size"]))
    if fault == "slug":
        header["slug"] = draw(slugs)
    elif fault == "command":
        header["command"] = draw(commands)
    elif fault == "limits":
        header["limits"][draw(st.integers(0, 4))] = draw(limit_values)
    elif fault == "layer":
        header["layer"] = draw(layers)
    elif fault == "timeout_ms":
        header["timeout_ms"] = draw(timeouts)
    elif fault == "files":
        header["files"] = draw(st.lists(st.sampled_from(FILE_PARTS), max_size=4) | file_lists)
    elif fault == "stdin":
        header["stdin"] = draw(stdin_flags)
    elif fault == "pipes":
        header["pipes"] = draw(stdin_flags)
    elif fault == "stdin_file":
        header["stdin_file"] = draw(stdin_flags)
    elif fault == "file_fds":
        header["file_fds"] = draw(file_fd_lists)
    elif fault == "descriptors":
        change = draw(st.sampled_from(["more", "fewer", "kind"]))
        if change == "more":
            descriptors = [*descriptors, draw(st.sampled_from(DESCRIPTOR_KINDS))]
        elif descriptors:
            at = draw(st.integers(0, len(descriptors) - 1))
            descriptors = descriptors[:at] + descriptors[at + 1 :] if change == "fewer" else [*descriptors[:at], draw(st.sampled_from(DESCRIPTOR_KINDS)), *descriptors[at + 1 :]]
    elif fault == "count":
        blobs = blobs[:-1] if blobs and draw(st.booleans()) else [*blobs, draw(blob)]
    elif blobs:
        limit = INPUT_MAX if header["command"] == "test" else JUDGE_INPUT_MAX
        blobs[draw(st.integers(0, len(blobs) - 1))] = b"x" * draw(st.integers(limit, limit + 1))
    return header, blobs, descriptors


def job_or_near_miss(served):
    return valid_jobs(served) | near_misses(served) | st.tuples(headers, blob_lists, descriptor_lists)


@st.composite
def raw_frames(draw, served: tuple[str, ...]) -> bytes:
    """A job frame as the front would send it, then (mostly) one lie: wrong blob sizes in the
    header, a header that is not a JSON object, a wrong header or frame size, or a cut."""
    header, blobs, _ = draw(job_or_near_miss(served))  # (sent without descriptors)
    lie = draw(st.sampled_from(["none", "blob sizes", "head", "head size", "size", "cut"]))
    sizes = [len(b) for b in blobs]
    if lie == "blob sizes":
        sizes = draw(st.lists(st.integers(-2, 2 * INPUT_MAX), max_size=6) | json_values)
    head = json.dumps({**header, "blobs": sizes}, separators=(",", ":"), ensure_ascii=True, allow_nan=True).encode()  # \ud800 stays an escape
    if lie == "head":
        head = draw(st.binary(max_size=64) | st.sampled_from([b"[]", b"null", b"{", b'{"blobs": 1}', b"\xff\xfe{}", b"NaN"]))
    body = b"".join(blobs)
    head_size, size = len(head), 4 + len(head) + len(body)
    if lie == "head size":
        head_size = draw(st.integers(0, 2**32 - 1) | st.integers(max(0, len(head) - 2), len(head) + 2))
    if lie == "size":
        size = draw(st.integers(0, 2**32 - 1) | st.integers(max(0, size - 2), size + 2) | st.integers(0, 8))
    frame = struct.pack(">II", size, head_size) + head + body
    return frame[: draw(st.integers(0, len(frame) - 1))] if lie == "cut" else frame


# --- the front's frames --------------------------------------------------------------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_jobs_as_the_front_writes_them_get_exactly_the_rules_answer(rt, recipe_fd, descriptor_files, data):
    header, blobs, descriptors = data.draw(job_or_near_miss(tuple(rt.workloads)))
    check_front_frame(header, blobs, descriptors, rt, recipe_fd, descriptor_files)


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_every_valid_job_is_accepted(rt, recipe_fd, descriptor_files, data):
    header, blobs, descriptors = data.draw(valid_jobs(tuple(rt.workloads)))
    assert check_front_frame(header, blobs, descriptors, rt, recipe_fd, descriptor_files)["op"] == "job"


def job_header(**overrides) -> dict:
    header = {"op": "job", "slug": "python", "command": "test", "timeout_ms": 1000, "limits": [0, 0, 0, 0, 0], "layer": "", "files": ["solution"], "stdin": False, "pipes": False, "stdin_file": False, "file_fds": [], "give_back": ""}
    return {**header, **overrides}


@pytest.mark.parametrize(
    ("header", "blobs", "message"),
    [
        (job_header(slug="cobol"), [b""], "unknown slug 'cobol'"),
        (job_header(slug=["python"]), [b""], "not in the form the front writes"),
        (job_header(timeout_ms=0), [b""], "bad timeout_ms 0"),
        (job_header(timeout_ms=10_001), [b""], "bad timeout_ms 10001"),
        (job_header(timeout_ms=1.5), [b""], "not in the form"),
        (job_header(timeout_ms=True), [b""], "not in the form"),
        (job_header(files=["solution", "../../etc/passwd"]), [b"", b""], "not in the form"),
        (job_header(files=["solution", "solution"]), [b"", b""], "bad files"),
        (job_header(files="solution"), [b""], "not in the form"),
        (job_header(files=["asserts"]), [b""], "no solution"),
        (job_header(files=["solution", "client_harness"]), [b"", b""], "client harness present"),
        (job_header(), [b"", b"extra"], "blob count"),
        (job_header(stdin=True), [b""], "blob count"),
        (job_header(), [b"x" * 1025], "RUN_INPUT_MAX"),
        ({**job_header(), "x": 1}, [b""], "not in the form"),
        (job_header(command="run"), [b""], "not in the form"),
        (job_header(limits=[0, 0, 0, 0]), [b""], "not in the form"),
        (job_header(limits=[0, 0, 0, OUTPUT_MAX + 1, 0]), [b""], "a job limit above its maximum"),
        (job_header(limits=[TIMEOUT_MAX_MS + 1, 0, 0, 0, 0]), [b""], "a job limit above its maximum"),
        (job_header(limits=[0, (1 << 30) + 1, 0, 0, 0]), [b""], "a job limit above its maximum"),
        (job_header(layer="a" * 64), [b""], "bad layer"),
        (job_header(command="exec", files=[], layer="a" * 63), [], "bad layer"),
        (job_header(command="exec", files=[]), [], "bad layer"),
        (job_header(command="exec", files=["../input"], layer="a" * 64), [b""], "not in the form"),
        (job_header(pipes=True), [b""], "pipes for a job other than an exec job without stdin"),
        (job_header(command="exec", files=[], layer="a" * 64, stdin=True, pipes=True), [b""], "pipes for a job other than"),
        (job_header(stdin_file=True), [b""], "a stdin file for a job other than an exec job"),
        (job_header(command="exec", files=[], layer="a" * 64, stdin=True, stdin_file=True), [b""], "a stdin file for a job other than"),
        (job_header(command="exec", files=[], layer="a" * 64, pipes=True, stdin_file=True), [], "a stdin file for a job other than"),
        (job_header(command="exec", files=[], layer="a" * 64, stdin_file="yes"), [], "not in the form"),
        (job_header(command="build", files=[]), [], "a build job without files"),
        (job_header(command="exec", files=["input"], layer="a" * 64, give_back="record"), [b""], "give_back names no file of an exec job"),
        (job_header(command="build", files=["record"], give_back="record"), [b""], "give_back names no file of an exec job"),
        (job_header(command="exec", files=["a.txt"], layer="a" * 64, give_back="a.txt"), [b""], "not in the form"),
        (job_header(command="build", files=["../x"]), [b""], "not in the form"),
        (job_header(command="build", files=["main.py", "main.py"]), [b"", b""], "bad files"),
        (job_header(command="build", files=["main.py"], stdin=True), [b"", b""], "a build job with stdin"),
        (job_header(command="build", files=["main.py"]), [b"x" * (JUDGE_INPUT_MAX + 1)], "the judge's part maximum"),
    ],
)
def test_bad_jobs_are_refused_with_a_reason(rt, recipe_fd, header, blobs, message):
    [reply] = native_check(protocol.encode(header, blobs), recipe_fd)
    assert reply["op"] == "error" and message in reply["error"], reply


CHECKER_FILES = {"command": "exec", "files": ["input", "output", "answer"], "layer": "a" * 64}  # its input and answer by descriptor


@pytest.mark.parametrize(
    ("header", "blobs", "descriptors", "message"),
    [
        (job_header(**CHECKER_FILES, file_fds=[0, 2]), [b"out"], ["dir", "file"], "the file given by descriptor is not a regular file open for reading only"),
        (job_header(**CHECKER_FILES, file_fds=[0, 2]), [b"out"], ["file", "write-only"], "not a regular file open for reading only"),
        (job_header(**CHECKER_FILES, file_fds=[0, 2]), [b"out"], ["pipe", "file"], "not a regular file open for reading only"),
        (job_header(**CHECKER_FILES, file_fds=[0, 2]), [b"out"], ["file", "big"], "larger than the judge's part maximum"),
        (job_header(**CHECKER_FILES, file_fds=[0, 2]), [b"out"], ["file", "file", "file"], "3 descriptors with a job that carries 2"),
        (job_header(**CHECKER_FILES, file_fds=[0, 2]), [b"out"], ["file"], "1 descriptors with a job that carries 2"),
        (job_header(**CHECKER_FILES, file_fds=[0, 2]), [b"out"], ["file"] * 12, f"{MAX_FRAME_FDS} descriptors with a job that carries 2"),
        (job_header(**CHECKER_FILES), [b"in", b"out", b"answer"], ["file"], "1 descriptors with a job that carries 0"),
        (job_header(**CHECKER_FILES, file_fds=[2, 0]), [b"out"], ["file", "file"], "file_fds must name files of the job, each once, in order"),
        (job_header(**CHECKER_FILES, file_fds=[0, 0]), [b"out", b""], ["file", "file"], "file_fds must name files"),
        (job_header(**CHECKER_FILES, file_fds=[3]), [b"", b"", b""], ["file"], "file_fds must name files"),
        (job_header(**{**CHECKER_FILES, "files": list("abcde")}, file_fds=[0, 1, 2, 3, 4]), [], ["file"] * 5, f"at most {protocol.FILE_FDS_MAX}"),
        (job_header(**CHECKER_FILES, file_fds=[-1]), [b"", b""], ["file"], "not in the form"),
        (job_header(**CHECKER_FILES, file_fds=0), [b"", b""], ["file"], "not in the form"),
        (job_header(**CHECKER_FILES, file_fds=[0]), [b"in", b"out", b"answer"], ["file"], "blob count"),
        (job_header(command="build", files=["main.py"], file_fds=[0]), [], ["file"], "files by descriptor for a job other than an exec job"),
        (job_header(files=["solution"], file_fds=[0]), [], ["file"], "files by descriptor for a job other than an exec job"),
        (job_header(command="exec", files=[], layer="a" * 64, stdin_file=True), [], ["dir"], "the stdin file is not a regular file open for reading only"),
        (job_header(command="exec", files=[], layer="a" * 64, stdin_file=True), [], ["big"], "the stdin file is larger than the judge's part maximum"),
        (job_header(command="exec", files=[], layer="a" * 64, pipes=True), [], ["pipe"], "1 descriptors with a job that carries 2"),
    ],
)
def test_bad_descriptors_are_refused_with_a_reason(rt, recipe_fd, descriptor_files, header, blobs, descriptors, message):
    fds = opened(descriptors, descriptor_files)
    try:
        [reply] = native_check(protocol.encode(header, blobs), recipe_fd, fds=fds)
    finally:
        for fd in fds:
            os.close(fd)
    assert reply["op"] == "error" and message in reply["error"], reply


def test_an_interactors_input_and_answer_by_descriptor_follow_its_pipes(recipe_fd, descriptor_files):
    header = job_header(**{**CHECKER_FILES, "files": ["input", "record", "answer"]}, pipes=True, file_fds=[0, 2], give_back="record")
    fds = opened(["pipe", "pipe", "file", "file"], descriptor_files)
    try:
        [reply] = native_check(protocol.encode(header, [b""]), recipe_fd, fds=fds)
    finally:
        for fd in fds:
            os.close(fd)
    assert reply["op"] == "job" and reply["file_fds"] == [0, 2] and reply["files"] == ["input", "record", "answer"], reply


# --- raw frames ----------------------------------------------------------------------------


def check_raw(frame: bytes, rt, recipe_fd: int) -> None:
    replies = native_check(frame, recipe_fd)
    if frame == b"":
        assert replies == []  # the front closed the slot unused
        return
    [reply] = replies
    if reply["op"] == "error":
        assert isinstance(reply["error"], str) and reply["error"]
        return
    header, blobs = protocol.decode_body(frame[4:])  # taken as a job: the frame is well formed
    assert struct.unpack(">I", frame[:4])[0] == len(frame) - 4
    header.pop("blobs")
    assert reply == verdict(header, blobs, rt)


def test_a_frame_refused_before_its_end_is_answered_though_the_rest_is_never_read(recipe_fd):
    # 16 MiB declared and sent: kiln-init refuses it at its length and closes with the rest unread,
    # so the sender's write fails while the refusal waits in its queue (a flaky "no reply" once)
    body = b"x" * (16 << 20)
    [reply] = native_check(struct.pack(">I", len(body)) + body, recipe_fd)
    assert reply["op"] == "error" and reply["error"], reply


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_garbage_frames_get_a_job_or_one_error_frame(rt, recipe_fd, data):
    check_raw(data.draw(raw_frames(tuple(rt.workloads))), rt, recipe_fd)


@pytest.mark.parametrize(
    "frame",
    [
        b"",  # closed unused
        b"\x00\x00\x00",  # closed inside the size prefix
        struct.pack(">II", 2**32 - 1, 0),  # a frame far over the limit: refused before reading it
        struct.pack(">II", 4, 0),  # an empty header
        struct.pack(">II", 6, 2) + b"{}",
        struct.pack(">II", 8, 4) + b"null",
        struct.pack(">II", 8, 2**31) + b"null",  # a header size past the frame
        protocol.encode(job_header(), [b"x"])[:-1],  # cut in its last blob
        protocol.encode(job_header(timeout_ms=512), [b"x"]).replace(b"512", b"052"),  # a leading zero
        protocol.encode(job_header(timeout_ms=10**15), [b"x"]),
        struct.pack(">II", 4 + 10_017, 10_017) + b'{"op":"job","x":' + b"[" * 5000 + b"]" * 5000 + b"}",  # nested deep
    ],
)
def test_edge_frames(rt, recipe_fd, frame):
    check_raw(frame, rt, recipe_fd)


# --- a prestarted slot ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("slug", "stdin", "served"),
    [("python", False, True), ("js", False, False), ("python", True, False)],
)
def test_a_prestarted_slot_serves_only_its_language_without_stdin(recipe_fd, slug, stdin, served):
    blobs = [b"x"] + ([b"in"] if stdin else [])
    [reply] = native_check(protocol.encode(job_header(slug=slug, stdin=stdin), blobs), recipe_fd, prestart="python")
    if served:
        assert reply["op"] == "job"
    else:
        assert reply == {"op": "error", "error": "slot warmed for python requests without stdin"}


def test_a_prestarted_slot_takes_no_job_with_its_own_memory_or_pids_limit(recipe_fd):
    for limits, taken in (([0, 0, 0, 100, 0], True), ([0, 64 << 20, 0, 0, 0], False), ([0, 0, 8, 0, 0], False), ([0, 0, 0, 0, 64 << 20], False)):
        [reply] = native_check(protocol.encode(job_header(limits=limits), [b"x"]), recipe_fd, prestart="python")
        assert (reply["op"] == "job") is taken, (limits, reply)


@pytest.mark.parametrize("command", ["build", "exec"])
def test_a_prestarted_slot_runs_no_judge_job(recipe_fd, command):
    header = job_header(command=command, files=["main.py"] if command == "build" else [], layer="a" * 64 if command == "exec" else "")
    [reply] = native_check(protocol.encode(header, [b"x"] if command == "build" else []), recipe_fd, prestart="python")
    assert reply == {"op": "error", "error": "slot warmed for python requests without stdin"}


def test_a_plain_slot_is_warmed_with_the_limits_most_languages_have(rt):
    counts = {}
    for w in rt.workloads.values():
        counts[(w.memory_max, w.pids_max)] = counts.get((w.memory_max, w.pids_max), 0) + 1
    assert counts[rt.common_limits] == max(counts.values())
