"""Test helpers: real kiln servers (root, real namespaces) started on free ports, and the one
view of processes the tests have (read from /proc: `Proc`, `processes`, `children`,
`descendants`, `alive`, `processes_of_uids`; a server's slots and templates: `Server.slots()` and
the like, a slot's title read with kiln.slots.TITLE).

A module of its own, not conftest.py: several test folders have a conftest, and `import conftest`
would find whichever was imported first.
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx

from kiln.slots import TITLE

REPO = Path(__file__).resolve().parent.parent
KILN = REPO / ".venv" / "bin" / "kiln"
# KILN_TEST_ROOTLESS=1: every server is started rootless (scripts/rootless.sh: as the user kiln,
# in a cgroup subtree it owns; `make test` runs the api, security and language suites so too)
ROOTLESS = os.environ.get("KILN_TEST_ROOTLESS") == "1"
ROOTLESS_LAUNCHER = REPO / "scripts" / "rootless.sh"
ROOTLESS_USER = os.environ.get("RUN_ROOTLESS_USER", "kiln")
_instances = itertools.count(1)


def wait_until(predicate, timeout: float = 20.0, interval: float = 0.02) -> bool:
    """Poll predicate until it holds or timeout seconds pass; its last answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


@dataclass(frozen=True)
class Proc:
    """A process as /proc shows it."""

    pid: int
    ppid: int
    uid: int  # its real uid
    zombie: bool  # ended, not yet reaped
    title: str  # its cmdline, NULs as spaces ("" for a zombie)
    nspid: tuple[int, ...]  # its pid in each pid namespace it is in, the host's first


def process(pid: int) -> Proc | None:
    """pid as /proc shows it; None once it is gone."""
    try:
        status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
        title = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return Proc(
        pid,
        int(status["PPid"]),
        int(status["Uid"].split()[0]),
        status["State"].split()[0] == "Z",
        title,
        tuple(int(n) for n in status["NSpid"].split()),
    )


def processes() -> list[Proc]:
    """Every process of the host, zombies included."""
    found = (process(int(entry)) for entry in os.listdir("/proc") if entry.isdigit())
    return [proc for proc in found if proc is not None]


def children(pid: int) -> list[Proc]:
    """pid's children (forked by any of its threads), zombies included; one that ended and was
    reaped as we looked is left out."""
    listed: set[int] = set()
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                listed.update(int(child) for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split())
            except FileNotFoundError:
                pass
    except FileNotFoundError:
        return []
    found = (process(child) for child in sorted(listed))
    return [proc for proc in found if proc is not None]


def descendants(pid: int) -> list[Proc]:
    """pid's children, theirs, and so on."""
    found = []
    for child in children(pid):
        found += [child, *descendants(child.pid)]
    return found


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    proc = process(pid)
    return proc is not None and not proc.zombie


def host_uid(uid: int) -> int:
    """One of kiln's uids (a slot's, the front's) as the host sees it: itself under root;
    rootless, through the map kiln's user namespace has (kiln.rootless computes it the same
    way for the user the servers run as)."""
    if not ROOTLESS:
        return uid
    import pwd  # noqa: PLC0415

    from kiln import rootless  # noqa: PLC0415

    user = pwd.getpwnam(ROOTLESS_USER)
    outside = rootless.planned_namespace(user.pw_uid, user.pw_gid).outside(uid)
    assert outside is not None, f"uid {uid} is not mapped for {ROOTLESS_USER}"
    return outside


def processes_of_uids(uids) -> list[Proc]:
    """The host's live processes of these uids of kiln's (a run's tasks: one uid per slot index;
    rootless, mapped by host_uid), except the prestart commands of warm slots: started for the
    next request of their slot, they have run nothing of any request."""
    wanted = {host_uid(uid) for uid in uids}
    live = [proc for proc in processes() if not proc.zombie]
    prestarted_inits = {proc.pid for proc in live if (slot := SlotView.of(proc)) and slot.state == "warm" and slot.lang}
    return [proc for proc in live if proc.uid in wanted and proc.ppid not in prestarted_inits]


def burst(server: "Server", count: int, **fields) -> list[httpx.Response]:
    """`count` POST /run of `fields` at once, each on a connection of its own; the answers in order."""
    answers: list = [None] * count

    def one(i: int) -> None:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            answers[i] = client.post("/run", json=fields)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers


@dataclass(frozen=True)
class SlotView:
    """A slot as `ps` shows it: its init's pid and what its title says (kiln.slots.TITLE, the
    grammar kiln-init writes)."""

    pid: int
    index: int
    state: str  # warming, warm, busy
    lang: str | None  # the language it is warm for (prestarted) or busy with
    age_s: float | None = None  # how long it has been busy (its title says once a second)

    @classmethod
    def of(cls, proc: Proc) -> "SlotView | None":
        """proc as a slot, if its title is a slot's (a slot's init between its spawn and its first
        title, or a zombie, is not)."""
        match = TITLE.fullmatch(proc.title)
        if not match:
            return None
        return cls(proc.pid, int(match[1]), match[2], match[3], float(match[4]) if match[4] else None)


# runs long enough for `count` of them at once to take `count` different slots (wait_prestarted)
PAUSE = {
    "python": "import time\ntime.sleep(0.2)\n",
    "js": "setTimeout(() => {}, 200);\n",
    "ts": "setTimeout(() => {}, 200);\n",
    "elixir": "Process.sleep(200)\n",
    "clojure": "(Thread/sleep 200)\n",
    "ruby": "sleep 0.2\n",
    "php": "<?php usleep(200000);\n",
}


def with_slot_uid(seen: dict) -> dict:
    """A probe's answer (its /proc/self/status fields under "status") with its slot's own uid
    (one per slot index, never root, the same for every uid and gid) written as "uid", so that
    two slots' answers compare."""
    uid = seen["status"]["Uid"][0]
    assert int(uid) >= 10001 and seen["status"]["Uid"] == seen["status"]["Gid"] == [uid] * 4
    seen["status"]["Uid"] = seen["status"]["Gid"] = "uid"
    return seen


def searchable(folder: Path) -> Path:
    """A test's own folder (below pytest's 0700 tmp_path), made readable by others, and its
    parents searchable, when the servers run rootless: kiln's user must read the workspaces a
    test writes there (make lists a workspace's folder to find its Makefile)."""
    if ROOTLESS:
        for path, wanted in ((folder, 0o005), *((parent, 0o001) for parent in folder.parents)):
            mode = path.stat().st_mode
            if mode & wanted != wanted:
                path.chmod(mode | wanted)
    return folder


def give_to_kiln(path: Path) -> Path:
    """A folder a test makes for kiln to write in (TMPDIR, say): rootless, owned by kiln's user."""
    if ROOTLESS:
        searchable(path)
        shutil.chown(path, ROOTLESS_USER, ROOTLESS_USER)
    return path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


_STORES: list[str] = []  # the file stores of this process's servers: none outlives the tests
atexit.register(lambda: [shutil.rmtree(store, ignore_errors=True) for store in _STORES])


def _own_store(path: str) -> str:
    _STORES.append(path)
    return path


class Server:
    """A `kiln serve` process; its log lines are collected as parsed logfmt/JSON records."""

    def __init__(self, env: dict[str, str], argv: list[str] | None = None):
        self.port = free_port()
        self.instance = f"kiln-test-{os.getpid()}-{next(_instances)}"
        self.env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "HOST": "127.0.0.1",
            "PORT": str(self.port),
            "RUN_INSTANCE": self.instance,
            # the file store survives the service, so a test server's is its own and removed at its
            # stop (or, for a server a test killed and never stopped, when the tests end)
            "RUN_FILE_STORE": _own_store(f"/tmp/{self.instance}-files"),
            "RUN_CONCURRENCY": "4",
            "RUN_LOG_FORMAT": "json",
            **env,
        }
        self.records: list[dict] = []
        argv = argv or [str(KILN), "serve"]
        if ROOTLESS:  # the launcher execs the command: self.proc is still kiln's own process
            argv = [str(ROOTLESS_LAUNCHER), "exec", *argv]
        self.proc = subprocess.Popen(argv, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()
        self.url = f"http://127.0.0.1:{self.port}"
        self.client = httpx.Client(base_url=self.url, timeout=60)

    def _read_log(self) -> None:
        for line in self.proc.stdout:
            text = line.decode(errors="replace").rstrip("\n")
            try:
                self.records.append(json.loads(text))
            except ValueError:
                self.records.append({"msg": "raw", "text": text})

    def logged(self, msg: str) -> list[dict]:
        return [r for r in self.records if r.get("msg") == msg]

    def wait_ready(self, timeout: float = 60) -> "Server":
        deadline = time.monotonic() + timeout
        while not self.logged("slots warm"):
            if self.proc.poll() is not None:
                self._reader.join(2)
                raise RuntimeError(f"kiln exited with {self.proc.returncode}: {self.records}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"kiln not ready after {timeout}s: {self.records}")
            time.sleep(0.02)
        return self

    def run(self, lang_slug: str = "python", solution_text: str = "", **fields) -> httpx.Response:
        return self.client.post("/run", json={"lang_slug": lang_slug, "solution_text": solution_text, **fields})

    def pids(self) -> dict[str, int]:
        """Front and zygote pids (the zygote is the front's only child)."""
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
        return {"front": self.proc.pid, "zygote": int(children[0])}

    # -- the process view: what the zygote's children are doing -----------------------------

    def children(self) -> list[Proc]:
        """The zygote's children: the slots' inits and the language templates, and a slot that
        just ended (a zombie) until the zygote reaps it."""
        return children(self.pids()["zygote"])

    def slots(self) -> list[SlotView]:
        """The slots' inits (a slot's init between its spawn and its first title is left out)."""
        found = [slot for slot in map(SlotView.of, self.children()) if slot]
        return sorted(found, key=lambda slot: slot.index)

    def busy_slots(self) -> list[SlotView]:
        return [slot for slot in self.slots() if slot.state == "busy"]

    def warm_slots(self, lang: str | None = None) -> list[SlotView]:
        """The warm slots (with `lang`: those prestarted for it)."""
        return [slot for slot in self.slots() if slot.state == "warm" and (lang is None or slot.lang == lang)]

    def templates(self) -> list[int]:
        """The zygote's children running a template command, not counting a slot's init the
        template is cloning that moment (its copy until it execs kiln-init, but in the slot's
        own pid namespace: two pids in NSpid)."""
        depth = len(process(self.pids()["zygote"]).nspid)  # rootless, the zygote's pid namespace is its own
        return [proc.pid for proc in self.children() if proc.title.endswith(" --template") and len(proc.nspid) == depth]

    def host_uid(self, uid: int) -> int:
        """One of this server's uids as the host sees it, read from its zygote's uid_map (which
        must agree with the module's host_uid)."""
        for line in Path(f"/proc/{self.pids()['zygote']}/uid_map").read_text().splitlines():
            inside, outside, count = map(int, line.split())
            if inside <= uid < inside + count:
                assert outside + uid - inside == host_uid(uid)
                return outside + uid - inside
        raise AssertionError(f"uid {uid} is not mapped")

    def wait_prestarted(self, slug: str, count: int = 1) -> None:
        """Until `count` slots are warm for `slug` and their command settled (a request takes a
        slot still loading only when no settled one is warm, and it is not counted prestarted):
        a slot's replacement is warmed for the language of the request it served, and `count`
        requests at once take `count` slots."""
        deadline = time.monotonic() + 30
        while len(self.warm_slots(slug)) < count:
            assert time.monotonic() < deadline, self.slots()
            burst(self, count, lang_slug=slug, solution_text=PAUSE[slug])
            time.sleep(0.1)
        assert wait_until(lambda: self.settled(slug) >= count, timeout=max(1.0, deadline - time.monotonic())), (self.slots(), self.settled(slug))

    def settled(self, slug: str) -> int:
        """How many warm slots prestarted for `slug` have their command settled (/metrics)."""
        return int(self.metric(f'kiln_prestarted_slots{{lang="{slug}",loading="false"}}'))

    def metric(self, name: str) -> float:
        """The sum of /metrics' samples whose line starts with `name`."""
        text = self.client.get("/metrics").text
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))

    def run_logged(self, **fields) -> tuple[dict, dict]:
        """(the answer, the front's log record of it)."""
        request_id = uuid.uuid4().hex
        answer = self.client.post("/run", json=fields, headers={"X-Request-Id": request_id})
        assert answer.status_code == 200, (answer.text, self.logged("slot warm-up failed"), self.logged("template failed"))
        assert wait_until(lambda: [r for r in self.logged("request") if r.get("request_id") == request_id], timeout=5)
        return answer.json(), next(r for r in self.logged("request") if r.get("request_id") == request_id)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 40) -> int:
        self.client.close()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()
        finally:
            self._reader.join(5)
            if self.env["RUN_FILE_STORE"] == f"/tmp/{self.instance}-files":
                shutil.rmtree(self.env["RUN_FILE_STORE"], ignore_errors=True)
            if ROOTLESS:  # made by root for the user: the user cannot remove it from /run
                shutil.rmtree(f"/run/{self.instance}", ignore_errors=True)


def flow_label_claims(labels: int = 1, rounds: int = 1) -> str:
    """A python program that claims `labels` IPv6 flow labels `rounds` times and prints, per
    round, "new" or "taken" for each: a label outlives its socket (its linger time) in the network
    namespace, so "taken" in a first round says another process of the namespace made it."""
    return f"""
import socket, struct
def claim(label):
    # IPV6_FLOWLABEL_MGR (32) at IPPROTO_IPV6 (41): get a label, create it, exclusively (3), any
    # sharer (255), kept 60 s after its socket closes; EEXIST: this network namespace has it
    request = struct.pack("16sIBBHHHI", socket.inet_pton(socket.AF_INET6, "2001:db8::1"), socket.htonl(label), 0, 255, 3, 60, 60, 0)
    with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
        try:
            s.setsockopt(41, 32, request)
            return "new"
        except OSError as error:
            return "taken" if error.errno == 17 else error.strerror
print("|".join(" ".join(claim(0x2A000 + i) for i in range({labels})) for _ in range({rounds})))
"""
