"""Garbage never crashes the root side: whatever frame arrives on a slot's socket, the slot's init
(kiln-init) either takes it as a job or answers one error frame (issue 7, "Fuzzing").

kiln-init's own reading code runs in its check mode (`kiln-init check`: one frame on stdin,
answered with what it parsed or with the error a slot would send), on:
- the front's job frames (protocol.encode of api.py's header) for valid jobs and for near
  misses of them: the answer must be exactly what the rules below say;
- raw frames with lying sizes, truncated bodies and non-JSON headers: one answer, and a job only
  for a frame that is well formed and valid by the rules.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kiln import config, langs, native, runtime
from kiln.sandbox import plan
from kiln.sandbox.cgroups import NoSlot
from kiln.zygote import protocol, recipe

REPO = Path(__file__).resolve().parents[2]
INPUT_MAX = 1024
TIMEOUT_MAX_MS = 10_000
FILE_PARTS = protocol.PARTS
FRONT_KEYS = list(protocol.JOB_KEYS)  # protocol.encode_job's header, in its order


@pytest.fixture(scope="module")
def rt():
    built = runtime.build(config.load({"RUN_INPUT_MAX": str(INPUT_MAX), "RUN_TIMEOUT_MAX": f"{TIMEOUT_MAX_MS}ms"}, REPO))
    assert "python" in built.workloads
    return built


@pytest.fixture(scope="module")
def recipe_fd(rt):
    root = plan.root_plan(uid=10001, gid=10001, host_paths=rt.host_paths, workspaces=str(rt.config.workspace), tmp_size=1 << 20, tmp_inodes=64)
    fd = recipe.sealed_memfd(recipe.compile_recipe(0, root, rt, NoSlot("fuzz")))
    yield fd
    os.close(fd)


def native_check(frame: bytes, recipe_fd: int, prestart: str | None = None) -> list[dict]:
    """kiln-init's answers to `frame` (of a slot prestarted for `prestart`, if given); it must
    exit 0 whatever came."""
    ours, theirs = socket.socketpair()
    env = {"KILN_RECIPE": str(recipe_fd), **({"KILN_PRESTART": prestart} if prestart else {})}
    with ours:
        proc = subprocess.Popen([str(native.INIT), "check"], stdin=theirs, env=env, pass_fds=(recipe_fd,))
        theirs.close()
        replies = []
        try:
            ours.sendall(frame)  # a slot stops reading after its one frame
            ours.shutdown(socket.SHUT_WR)
            while (reply := protocol.recv_frame(ours, 1 << 20)) is not None:
                replies.append(reply[0])
        except (BrokenPipeError, ConnectionResetError):
            pass
    assert proc.wait(10) == 0
    return replies


def verdict(header: dict, blobs: list[bytes], rt) -> dict | None:
    """The rules: what kiln-init must answer for this job, None for an error frame. The header is
    taken only in the one form the front writes."""
    if list(header) != FRONT_KEYS or header["op"] != "job":
        return None
    slug, timeout_ms, parts, stdin = header["slug"], header["timeout_ms"], header["files"], header["stdin"]
    if not isinstance(slug, str) or slug not in rt.workloads:
        return None
    if type(timeout_ms) is not int or not 0 < timeout_ms <= TIMEOUT_MAX_MS:
        return None
    if not isinstance(parts, list) or not all(isinstance(p, str) and p in FILE_PARTS for p in parts) or len(set(parts)) != len(parts):
        return None
    if type(stdin) is not bool or len(blobs) != len(parts) + stdin or any(len(b) > INPUT_MAX for b in blobs):
        return None
    if "solution" not in parts or rt.workloads[slug].language.has_checker != ("checker" in parts):
        return None
    return {"op": "job", "slug": slug, "timeout_ms": timeout_ms, "stdin": stdin, "files": parts}


def check_front_frame(header: dict, blobs: list[bytes], rt, recipe_fd: int) -> dict | None:
    try:
        frame = protocol.encode(header, blobs)
    except UnicodeEncodeError:
        return None  # a lone surrogate: nothing the front can write (raw frames carry them escaped)
    [reply] = native_check(frame, recipe_fd)
    expected = verdict(header, blobs, rt)
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
parts = st.sampled_from(FILE_PARTS) | st.sampled_from(["../checker", "solution ", "Solution", "stdin", ""]) | scalars
file_lists = st.lists(st.sampled_from(FILE_PARTS), max_size=4) | st.lists(parts, max_size=5) | json_values
stdin_flags = st.booleans() | json_values

headers = st.builds(
    lambda known, extra: {**extra, **known},
    st.fixed_dictionaries({}, optional={"op": st.just("job") | json_values, "slug": slugs, "timeout_ms": timeouts, "files": file_lists, "stdin": stdin_flags}),
    st.dictionaries(text, json_values, max_size=3),
)
blob = st.binary(max_size=24) | st.integers(INPUT_MAX - 1, INPUT_MAX + 1).map(lambda n: b"x" * n)
blob_lists = st.lists(blob, max_size=5)


@st.composite
def valid_jobs(draw, served: tuple[str, ...]):
    """Well-formed jobs for the served languages, as the front writes them."""
    slug = draw(st.sampled_from(served))
    has_checker = langs.LANGUAGES[slug].has_checker
    names = ["solution", *(["checker"] if has_checker else []), *draw(st.lists(st.just("asserts"), max_size=1))]
    names = draw(st.permutations(names))
    stdin = draw(st.booleans())
    header = {"op": "job", "slug": slug, "timeout_ms": draw(st.integers(1, TIMEOUT_MAX_MS)), "files": names, "stdin": stdin}
    return header, draw(st.lists(st.binary(max_size=INPUT_MAX), min_size=len(names) + stdin, max_size=len(names) + stdin))


@st.composite
def near_misses(draw, served: tuple[str, ...]):
    """A valid job with one thing wrong, so that every rule gets its turn: the slug, the timeout,
    the file parts (any subset or repeat), the stdin flag, the blob count, a blob's size."""
    header, blobs = draw(valid_jobs(served))
    fault = draw(st.sampled_from(["slug", "timeout_ms", "files", "stdin", "count", "size"]))
    if fault == "slug":
        header["slug"] = draw(slugs)
    elif fault == "timeout_ms":
        header["timeout_ms"] = draw(timeouts)
    elif fault == "files":
        header["files"] = draw(st.lists(st.sampled_from(FILE_PARTS), max_size=4) | file_lists)
    elif fault == "stdin":
        header["stdin"] = draw(stdin_flags)
    elif fault == "count":
        blobs = blobs[:-1] if blobs and draw(st.booleans()) else [*blobs, draw(blob)]
    else:
        blobs[draw(st.integers(0, len(blobs) - 1))] = b"x" * draw(st.integers(INPUT_MAX, INPUT_MAX + 1))
    return header, blobs


def job_or_near_miss(served):
    return valid_jobs(served) | near_misses(served) | st.tuples(headers, blob_lists)


@st.composite
def raw_frames(draw, served: tuple[str, ...]) -> bytes:
    """A job frame as the front would send it, then (mostly) one lie: wrong blob sizes in the
    header, a header that is not a JSON object, a wrong header or frame size, or a cut."""
    header, blobs = draw(job_or_near_miss(served))
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
def test_jobs_as_the_front_writes_them_get_exactly_the_rules_answer(rt, recipe_fd, data):
    header, blobs = data.draw(job_or_near_miss(tuple(rt.workloads)))
    check_front_frame(header, blobs, rt, recipe_fd)


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_every_valid_job_is_accepted(rt, recipe_fd, data):
    header, blobs = data.draw(valid_jobs(tuple(rt.workloads)))
    assert check_front_frame(header, blobs, rt, recipe_fd)["op"] == "job"


def job_header(**overrides) -> dict:
    return {"op": "job", "slug": "python", "timeout_ms": 1000, "files": ["solution"], "stdin": False, **overrides}


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
        (job_header(files=["solution", "checker"]), [b"", b""], "checker"),
        (job_header(), [b"", b"extra"], "blob count"),
        (job_header(stdin=True), [b""], "blob count"),
        (job_header(), [b"x" * 1025], "RUN_INPUT_MAX"),
        ({**job_header(), "x": 1}, [b""], "not in the form"),
    ],
)
def test_bad_jobs_are_refused_with_a_reason(rt, recipe_fd, header, blobs, message):
    [reply] = native_check(protocol.encode(header, blobs), recipe_fd)
    assert reply["op"] == "error" and message in reply["error"], reply


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


def test_a_plain_slot_is_warmed_with_the_limits_most_languages_have(rt):
    counts = {}
    for w in rt.workloads.values():
        counts[(w.memory_max, w.pids_max)] = counts.get((w.memory_max, w.pids_max), 0) + 1
    assert counts[rt.common_limits] == max(counts.values())
