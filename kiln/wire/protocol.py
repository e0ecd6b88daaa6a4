"""The frames every kiln process exchanges (front, zygote, slot), and their one codec.

A frame on a SOCK_STREAM Unix socket is:

    u32 size of the rest | u32 size of the header | header (compact JSON object) | blobs

Blobs carry bulk bytes (source files, stdin, stdout, stderr) without JSON escaping; the header
lists their sizes under "blobs". A frame may carry descriptors (SCM_RIGHTS) on its first byte:
that is how the zygote hands a warm slot's socket to the front.

Receivers bound every size: the root side trusts nothing the front sends.

A slot's side of it is kiln-init's (kiln/native/frames.c, result.c): a job in, its one result
out (a kept slot takes one judge request's tests so, one after another). Their forms are owned
here: encode_job writes a Job in the one form kiln-init accepts (JOB_KEYS,
in that order), decode_result reads its answer into a RunResult; nothing above this module
handles their raw keys.
"""

from __future__ import annotations

import array
import json
import socket
import struct
from dataclasses import dataclass

_PREFIX = struct.Struct(">II")
MAX_HEADER = 64 * 1024
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_loads = json.JSONDecoder().decode


class ProtocolError(Exception):
    pass


def encode(header: dict, blobs: tuple[bytes, ...] | list[bytes] = ()) -> bytes:
    if blobs:
        header = {**header, "blobs": [len(b) for b in blobs]}
    head = _dumps(header).encode()
    size = 4 + len(head) + sum(len(b) for b in blobs)
    return b"".join((_PREFIX.pack(size, len(head)), head, *blobs))


def decode(payload: memoryview | bytes, head_size: int) -> tuple[dict, list[bytes]]:
    """`payload` is the frame after its first u32 (so it starts with the header size)."""
    payload = memoryview(payload)
    if head_size > MAX_HEADER or head_size > len(payload) - 4:
        raise ProtocolError(f"header of {head_size} bytes does not fit the frame")
    try:
        header = _loads(str(payload[4 : 4 + head_size], "utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise ProtocolError(f"header is not JSON: {error}") from None
    if not isinstance(header, dict):
        raise ProtocolError("header is not a JSON object")
    sizes = header.get("blobs", [])
    if not isinstance(sizes, list) or not all(type(n) is int and n >= 0 for n in sizes):
        raise ProtocolError("bad blob sizes")
    blobs, offset = [], 4 + head_size
    for n in sizes:
        blobs.append(bytes(payload[offset : offset + n]))
        offset += n
    if offset != len(payload):
        raise ProtocolError("blob sizes do not add up to the frame size")
    return header, blobs


def _recv_exactly(sock: socket.socket, size: int, fds: list[int] | None) -> memoryview | None:
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        if fds is None:
            n = sock.recv_into(view[got:])
        else:
            n = _recv_into_with_fds(sock, view[got:], fds)
        if n == 0:
            if got == 0:
                return None
            raise ProtocolError("connection closed inside a frame")
        got += n
    return view


_FD_SPACE = socket.CMSG_SPACE(16 * array.array("i").itemsize)


def _recv_into_with_fds(sock: socket.socket, view: memoryview, fds: list[int]) -> int:
    n, ancdata, _flags, _addr = sock.recvmsg_into([view], _FD_SPACE, socket.MSG_CMSG_CLOEXEC)
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            received = array.array("i")
            received.frombytes(data[: len(data) - len(data) % received.itemsize])
            fds.extend(received)
    return n


def recv_frame(sock: socket.socket, max_size: int, fds: list[int] | None = None) -> tuple[dict, list[bytes]] | None:
    """Read one frame; None on a clean end of stream before it. Descriptors that arrive are
    appended to `fds` (in order, close-on-exec), when given."""
    prefix = _recv_exactly(sock, 4, fds)
    if prefix is None:
        return None
    (size,) = struct.unpack(">I", prefix)
    if size < 4 or size > max_size:
        raise ProtocolError(f"frame of {size} bytes (limit {max_size})")
    body = _recv_exactly(sock, size, fds)
    if body is None:
        raise ProtocolError("connection closed inside a frame")
    return decode_body(body)


def decode_body(body: memoryview | bytes) -> tuple[dict, list[bytes]]:
    """A frame after its first u32, as encode() made it."""
    (head_size,) = struct.unpack(">I", body[:4])
    return decode(body, head_size)


def send_frame(sock: socket.socket, header: dict, blobs: tuple[bytes, ...] | list[bytes] = (), fds: tuple[int, ...] = ()) -> None:
    data = encode(header, blobs)
    if fds:
        sent = sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    else:
        sent = sock.send(data)  # a frame fits the socket's buffer as a rule: gevent's sendall asks its size first
    data = data[sent:]
    if data:
        sock.sendall(data)


# --- a slot warm: its one frame to the zygote --------------------------------------------------

# A warming slot's one frame to the zygote (init.c warm): {"op": "ready"}, or with READY_ROOT_IMAGE
# true when the slot built its index's root image, whose mount namespace rides with the frame;
# {"op": "failed", "error": text} when it did not warm.
READY_ROOT_IMAGE = "root_image"  # kiln.h READY_ROOT_IMAGE


# --- one job, one result: the front <-> kiln-init contract ------------------------------------

JOB_KEYS = ("op", "slug", "command", "timeout_ms", "limits", "layer", "files", "stdin", "pipes", "stdin_file", "file_fds", "give_back")  # then "blobs" (encode): kiln.h JOB_KEYS, header.c reads them in this order
FILE_FDS_MAX = 4  # an exec job's files given by descriptor, at most (kiln.h MAX_FILE_FDS)
PARTS = ("solution", "client_harness", "asserts")  # the files a test job may carry (header.c PART_NAMES)
# what a job runs (header.c COMMAND_NAMES): the workspace's test command (POST /run), or a
# judge's build of its files (answered with the build's layer) or one test on that layer
COMMANDS = ("test", "build", "exec")
# what kiln-init reports (result.c), in DESIGN.md's precedence
OUTCOMES = ("timed_out", "out_of_memory", "policy_violation", "pids_limit", "signaled", "exited", "infrastructure_failure")


@dataclass(frozen=True)
class Limits:
    """A job's own limits, each 0 for its language's (and the service's) own: the job header's
    "limits", in JOB_LIMITS' order."""

    cpu_ms: int = 0  # CPU time of the whole run: stopped there, as timed_out
    memory: int = 0  # bytes, the slot's cgroup limit
    pids: int = 0
    output: int = 0  # bytes of stdout (a judge's test: stderr is cut there without a verdict)
    address_space: int = 0  # bytes, RLIMIT_AS of the task, with an allocation refused for it seen (addrspace.c); 0 none

    def as_list(self) -> list[int]:
        return [self.cpu_ms, self.memory, self.pids, self.output, self.address_space]


# the job header's limits by position, and the codes of the recipe's K_JOB_LIMIT records (kiln.h
# JOB_LIMITS; tests/unit/test_contract.py compares them, and as_list's order)
JOB_LIMITS = ("cpu_ms", "memory", "pids", "output", "address_space")


@dataclass(frozen=True)
class ByDescriptor:
    """A job file's content that is a file of the store: a descriptor of it, open for reading
    only, sent with the frame (job_fds) instead of its bytes; kiln-init checks it (a regular
    file, read-only, within the judge's part maximum) and copies it into the sandbox from its
    start. The caller's to close, after the job (a Session may send it again to a fresh slot)."""

    fd: int


@dataclass(frozen=True)
class Job:
    slug: str
    timeout_ms: int
    # (part, content): parts of PARTS, or a build's file names; an exec job's content may be a
    # file of the store by descriptor (at most FILE_FDS_MAX of them)
    files: tuple[tuple[str, bytes | ByDescriptor], ...]
    stdin: bytes | None = None  # None: the task's stdin is /dev/null
    command: str = "test"  # one of COMMANDS
    limits: Limits = Limits()
    layer: str = ""  # an exec job's build (its layer's name: 64 hex digits)
    # an interactive test's exec job: two descriptors sent with the frame, the task's stdin and
    # where its stdout goes on to (kiln-init passes it on as it comes)
    pipes: tuple[int, int] | None = None
    # a judge test's input that is a file of the store: a descriptor of it open for reading, sent
    # with the frame and read by the task as its stdin (kiln-init checks it is a regular file
    # opened read-only, within the judge's part maximum, and reads it from its start); the
    # caller's to close, after the job (a Session may send it again to a fresh slot)
    stdin_file: int | None = None
    # an exec job's file (one of `files`) whose content the task leaves comes back with the
    # result (RunResult.returned), at most its output limit and one byte: an interactor's record
    give_back: str = ""


@dataclass(frozen=True)
class RunResult:
    exit_code: int | None  # 128+N when killed by signal N; None when kiln stopped it for time
    outcome: str  # one of OUTCOMES
    wall_ms: float
    cpu_ms: float
    memory_peak_bytes: int
    signal: int | None
    output_overflow: bool  # killed at once for output over RUN_OUTPUT_MAX (or the job's own)
    stdout: bytes
    stderr: bytes
    # the result's third blob: a build job that exited 0, what it left (LAYER entries); an exec
    # job with give_back, that file's content (one byte past its output limit says it was longer)
    returned: bytes | None = None
    next: bool = False  # the slot can run another judge test (exec job) after this one
    # the job's address-space limit refused an allocation (or the program's exec) of the task's
    address_space_reached: bool = False
    # when the task was reaped, in ms of CLOCK_MONOTONIC, shared by every slot of the host: which
    # of an interactive test's two runs ended first (judge.py ended_first); in no answer's JSON
    ended_ms: float = 0.0


class PrestartFailed(Exception):
    """A prestarted slot's prestart command had died before its request: the request was not run."""


def encode_job(job: Job) -> tuple[dict, list[bytes]]:
    """The job frame's header and blobs (send_frame adds the blob sizes; the job's pipes, or its
    stdin file, and its files by descriptor go as the frame's descriptors: job_fds)."""
    by_fd = [index for index, (_, content) in enumerate(job.files) if isinstance(content, ByDescriptor)]
    values = (
        "job", job.slug, job.command, job.timeout_ms, job.limits.as_list(), job.layer, [name for name, _ in job.files],
        job.stdin is not None, job.pipes is not None, job.stdin_file is not None, by_fd, job.give_back,
    )  # fmt: skip
    header = dict(zip(JOB_KEYS, values))
    blobs = [content for _, content in job.files if not isinstance(content, ByDescriptor)] + ([job.stdin] if job.stdin is not None else [])
    return header, blobs


def job_fds(job: Job) -> tuple[int, ...]:
    """The descriptors the job's frame carries, in the order kiln-init takes them: its two pipes,
    or its stdin file, or none; then its files' by descriptor, in the files' order."""
    first = job.pipes or ((job.stdin_file,) if job.stdin_file is not None else ())
    return (*first, *(content.fd for _, content in job.files if isinstance(content, ByDescriptor)))


# result.c writes "op" then these, in this order
_RESULT_TYPES = {"exit_code": (int, type(None)), "outcome": (str,), "wall_ms": (int, float), "cpu_ms": (int, float), "memory_peak_bytes": (int,), "signal": (int, type(None)), "output_overflow": (bool,), "next": (bool,), "address_space_reached": (bool,), "ended_ms": (int, float)}
RESULT_KEYS = ("op", *_RESULT_TYPES)


def decode_result(frame: tuple[dict, list[bytes]]) -> RunResult:
    """A slot's answer to its job. Raises PrestartFailed for that answer, ProtocolError for any
    other than a well-formed result."""
    header, blobs = frame
    if header.get("op") == "prestart_failed":
        raise PrestartFailed(str(header.get("error")))
    if header.get("op") != "result" or len(blobs) not in (2, 3):
        raise ProtocolError(f"the slot answered {header!r}")
    wrong = [key for key, types in _RESULT_TYPES.items() if key not in header or type(header[key]) not in types]
    if wrong or header["outcome"] not in OUTCOMES:
        raise ProtocolError(f"the slot's result has a bad {', '.join(wrong) or 'outcome'}: {header!r}")
    return RunResult(**{key: header[key] for key in _RESULT_TYPES}, stdout=blobs[0], stderr=blobs[1], returned=blobs[2] if len(blobs) == 3 else None)


# --- a build's layer: what a judge's build job left in the workspace (kiln-init's layer.c) -----
#
#     entry = u8 type | u16 mode | u16 path length | u32 data length | path | data   (big-endian)
#
# type: b"d" a directory, b"f" a regular file (data: its bytes), b"l" a symbolic link (data: its
# target); paths relative to /sandbox, parents before their children.
LAYER_ENTRY = struct.Struct(">cHHI")
LAYER_TYPES = (b"d", b"f", b"l")
LAYER_MAX = 256 * 1024 * 1024  # what one build may leave (a bigger one is an infrastructure failure)


@dataclass(frozen=True)
class LayerEntry:
    type: bytes  # one of LAYER_TYPES
    mode: int
    path: str
    data: memoryview


def read_layer(layer: bytes) -> list[LayerEntry]:
    """The entries of a layer, checked for shape: every path relative, without "." or "..",
    below a directory of the layer met before it. Raises ProtocolError."""
    view, at, entries, dirs = memoryview(layer), 0, [], {""}
    while at < len(view):
        if len(view) - at < LAYER_ENTRY.size:
            raise ProtocolError("layer: an entry cut short")
        kind, mode, path_len, size = LAYER_ENTRY.unpack_from(view, at)
        at += LAYER_ENTRY.size
        if kind not in LAYER_TYPES or len(view) - at < path_len + size:
            raise ProtocolError("layer: a bad entry")
        try:
            path = str(view[at : at + path_len], "utf-8", "surrogateescape")
        except UnicodeDecodeError:
            raise ProtocolError("layer: a path that is not text") from None
        parts = path.split("/")
        if any(part in ("", ".", "..") or "\0" in part for part in parts) or "/".join(parts[:-1]) not in dirs:
            raise ProtocolError(f"layer: a bad path {path!r}")
        if kind == b"d":
            dirs.add(path)
        entries.append(LayerEntry(kind, mode & 0o777, path, view[at + path_len : at + path_len + size]))
        at += path_len + size
    return entries
