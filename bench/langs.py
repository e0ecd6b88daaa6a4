"""Per-language a+b: median time through kiln vs the same test command run bare.

For every language a kiln server serves (GET /languages), the language's example a+b
(tests/langs/examples/<slug>/, posted as tests/langs/test_<slug>.py posts it) goes through kiln
over HTTP (one server, RUN_CONCURRENCY=2, one keep-alive connection), and the very same files
go through the very same test command run bare, kiln and bare runs alternating (the order
flips every pair) so that the drift of a shared machine hits both sides alike.

"Bare" is kiln's run minus kiln: a helper process in a private mount namespace (`unshare -m`)
mounts, per run, a fresh overlay of the workspace (lower: langs/<slug>, with its prepared
caches) on /sandbox and a fresh tmpfs on /tmp, at kiln's sizes; writes the request's files
owned by the task's uid, as kiln does; then spawns the argv kiln runs (kiln's own
`task_argv`: `/bin/sh -e -c "<test command>"`, or the program itself when the command is one
plain `exec`) at /sandbox with kiln's task environment and rlimits, as an unprivileged uid, and
times spawn to reap (wall, and CPU from the reaped child's rusage). Setup and teardown of the
mounts are outside the bare timing; everything kiln adds is inside the kiln timing, which is
taken by the client around the HTTP request. Before every run, timed or not, the bench waits
until kiln has both slots warm again (GET /metrics), so that a slot being re-warmed after the
previous request never competes with the next run, on either side.

Target (issue 4): kiln adds under 5% or under 5 ms, whichever is larger, for every language.

    .venv/bin/python bench/langs.py [--runs N] [--langs a,b,...] [--rate-seconds S]

With --rate-seconds, each language's rate is then measured too: a second server with one slot
per client (--rate-clients, 8), every client posting the example back to back for S seconds,
against the rate the CPUs allow the bare command (CPUs / its median CPU time per run).

Root is needed (kiln serve, mounts). Default runs per side: 3 warm-ups, then 11 for a language
whose warm-up runs take 250 ms or more (the compilers), else 31. Writes bench/results/langs.json.
"""

from __future__ import annotations

import argparse
import ast
import ctypes
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "tests" / "langs" / "examples"
LANG_TESTS = REPO / "tests" / "langs"
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))
from client import KilnClient, load, run_facts  # noqa: E402 - bench/ is this script's folder

WARMUP = 3
SLOW_RUNS, FAST_RUNS = 11, 31
SLOW_MS = 250.0  # warm-up median (bare) from which a language counts as slow
TIMEOUT = "60s"
TARGET_PCT, TARGET_MS = 5.0, 5.0
BARE_UID = 9999  # the bare task's uid: no host account, below kiln's slot uids (RUN_UID_BASE, 10001 by default)
SANDBOX = "/sandbox"
# Languages without a folder in tests/langs/examples: the a+b of tests/langs_direct.
FALLBACK_AB = '{"arguments": [[1, 2], [10, -3], [0, 0], [2.5, 0.25]]}'
FALLBACK_SOLUTIONS = {
    "python": "def solution(a, b):\n    return a + b\n",
    "js": "module.exports = (a, b) => a + b;\n",
}
# Harness timings and other run-to-run numbers, masked before kiln's and bare stdout are compared.
VARYING = re.compile(r"\d+\.\d{4,}(?:[eE][-+]?\d+)?|\d+(?:\.\d+)?[eE]-\d+")


# -- the example a+b of a language ------------------------------------------------------------


def _test_constants(slug: str) -> dict:
    """Literal top-level ARGUMENTS / AB of tests/langs/test_<slug>.py (how its a+b is posted)."""
    path = LANG_TESTS / f"test_{slug}.py"
    if not path.is_file():
        return {}
    found = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in ("ARGUMENTS", "AB"):
                try:
                    found[name] = ast.literal_eval(node.value)
                except ValueError:
                    pass
    return found


def example(language) -> tuple[str, str | None, str | None]:
    """(solution, checker, asserts) texts of the language's example a+b."""
    folder = EXAMPLES / language.slug
    if not folder.is_dir():
        if language.slug not in FALLBACK_SOLUTIONS:
            raise LookupError(f"no example in {folder}")
        return FALLBACK_SOLUTIONS[language.slug], None, FALLBACK_AB
    texts = {p.name: p.read_text() for p in sorted(folder.iterdir()) if p.is_file()}
    asserts = texts.pop("asserts.json", None)
    checker = None
    if language.has_client_harness:
        name = os.path.basename(language.client_harness_file).lower()
        key = next((k for k in texts if k.lower() == name), None)
        if key is None:
            raise LookupError(f"no {name} in {folder}")
        checker = texts.pop(key)
    if len(texts) != 1:
        raise LookupError(f"{folder}: expected one solution file besides the checker and asserts.json, found {sorted(texts)}")
    (solution,) = texts.values()
    if asserts is None:
        constants = _test_constants(language.slug)
        if "ARGUMENTS" in constants:
            asserts = json.dumps({"arguments": constants["ARGUMENTS"]}, separators=(",", ":"))
        elif "AB" in constants:
            asserts = constants["AB"]
    return solution, checker, asserts


# -- kiln over HTTP -----------------------------------------------------------------------------


class Kiln(KilnClient):
    def run(self, payload: bytes) -> dict:
        wall, answer = self.post_run(payload)
        stats = answer["stats"]
        return {
            "wall_ms": wall * 1000,
            "inside_ms": stats["wall_ms"],  # kiln's own spawn-to-reap of the task
            "cpu_ms": stats["cpu_ms"],
            "ok": answer["exit_code"] == 0 and stats["outcome"] == "exited",
            "exit": answer["exit_code"],
            "outcome": stats["outcome"],
            "stdout": answer["stdout"],
            "stderr": answer["stderr"],
        }


# -- the bare side: a root helper in a private mount namespace ----------------------------------

MS_NOSUID, MS_NODEV, MS_BIND = 0x2, 0x4, 0x1000
MNT_DETACH = 0x2
_libc = ctypes.CDLL(None, use_errno=True)


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: None if s is None else os.fsencode(s)  # noqa: E731
    if _libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {fstype or 'bind'} on {target}: {os.strerror(err)}")


def _umount(target: str) -> None:
    if _libc.umount2(os.fsencode(target), MNT_DETACH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"umount {target}: {os.strerror(err)}")


def _passwd_with_runner(path: str, line: str) -> str:
    with open(path) as f:
        return f.read().rstrip("\n") + "\n" + line + "\n"


def worker(scratch: str, rlimits: str) -> int:
    """`langs.py --bare-worker <dir> <rlimits>`, started under `unshare -m`: one JSON job a line
    on stdin, one JSON result a line on stdout. Mounts made here are private to this namespace.

    The task's rlimits (kiln's, for the language) are set here, once, and inherited by every
    task: a root without CAP_SYS_RESOURCE (some VMs) could not raise them back between runs."""
    os.setgroups([])
    for r, v in json.loads(rlimits):
        resource.setrlimit(int(r), (v, v))
    uid = BARE_UID
    _mount("kiln-bench", scratch, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=700")
    # The task's account, as in kiln's /etc/passwd: "runner", home /sandbox (JVMs, mono and
    # others look the user up); the host's files otherwise, bound over in this namespace only.
    for name, line in (("passwd", f"runner:x:{uid}:{uid}:runner:{SANDBOX}:/bin/sh"), ("group", f"runner:x:{uid}:")):
        copy = os.path.join(scratch, name)
        with open(copy, "w") as f:
            f.write(_passwd_with_runner(f"/etc/{name}", line))
        os.chmod(copy, 0o644)
        _mount(copy, f"/etc/{name}", None, MS_BIND)
    upper_root = os.path.join(scratch, "upper")
    os.mkdir(upper_root, 0o700)
    for line in sys.stdin:
        job = json.loads(line)
        try:
            result = bare_run(job, upper_root, uid)
        except Exception as error:  # noqa: BLE001 - reported to the bench, which goes on
            result = {"error": f"{error!r} at {traceback.format_exc(limit=-2).strip()}"}
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()
    return 0


def bare_run(job: dict, upper_root: str, uid: int) -> dict:
    size, inodes = job["tmp_size"], job["inodes"]
    tmpfs_opts = f"size={size},nr_inodes={inodes}"
    _mount("kiln-bench", upper_root, "tmpfs", MS_NOSUID | MS_NODEV, tmpfs_opts + ",mode=700")
    mounted = [upper_root]
    try:
        upper, work = f"{upper_root}/upper", f"{upper_root}/work"
        os.mkdir(upper, 0o755)
        os.chown(upper, uid, uid)  # the overlay's root takes the upper dir's owner, as in kiln
        os.mkdir(work, 0o700)
        _mount("kiln-bench", SANDBOX, "overlay", MS_NOSUID | MS_NODEV, f"lowerdir={job['lower']},upperdir={upper},workdir={work}")
        mounted.append(SANDBOX)
        _mount("kiln-bench", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, tmpfs_opts + ",mode=1777")
        mounted.append("/tmp")
        for relpath in job["writable_dirs"]:
            path = SANDBOX
            for part in relpath.split("/"):
                path = os.path.join(path, part)
                if not os.path.isdir(path):
                    os.mkdir(path, 0o755)
                os.chown(path, uid, uid)  # a metadata copy-up, as kiln's make_writable
        for relpath, text in job["files"]:
            path = os.path.join(SANDBOX, relpath)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            try:
                os.write(fd, text.encode())
                os.fchown(fd, uid, uid)
            finally:
                os.close(fd)
        out = os.memfd_create("stdout")
        err = os.memfd_create("stderr")
        null = os.open("/dev/null", os.O_RDONLY)
        os.chdir(SANDBOX)
        try:
            # Saved ids stay 0 so this helper gets root back; the spawned task's exec makes
            # every id the task's (saved := effective) and drops every capability.
            os.setresgid(uid, uid, 0)
            os.setresuid(uid, uid, 0)
            started = time.perf_counter()
            pid = os.posix_spawn(job["argv"][0], job["argv"], job["env"], file_actions=[(os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, out, 1), (os.POSIX_SPAWN_DUP2, err, 2)])
        finally:
            os.setresuid(0, 0, 0)
            os.setresgid(0, 0, 0)
        _, status, usage = os.wait4(pid, 0)
        wall = time.perf_counter() - started
        os.chdir("/")
        os.close(null)
        stdout, stderr = (_read_all(fd) for fd in (out, err))
        code = os.waitstatus_to_exitcode(status)
        return {
            "wall_ms": wall * 1000,
            "cpu_ms": (usage.ru_utime + usage.ru_stime) * 1000,
            "ok": code == 0,
            "exit": code,
            "stdout": stdout,
            "stderr": stderr,
        }
    finally:
        os.chdir("/")
        for target in reversed(mounted):
            _umount(target)


def _read_all(fd: int) -> str:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")


class Bare:
    """The helper for one language (its rlimits are the helper's own)."""

    def __init__(self, rlimits: list[list[int]]):
        self.scratch = tempfile.mkdtemp(prefix="kiln-bench-", dir="/run")
        argv = ["unshare", "--mount", "--propagation", "private", sys.executable, str(Path(__file__).resolve()), "--bare-worker", self.scratch, json.dumps(rlimits)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, job: dict) -> dict:
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the bare helper exited ({self.proc.wait()})")
        result = json.loads(line)
        if "error" in result:
            raise RuntimeError(f"bare run failed to set up: {result['error']}")
        return result

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(30)
        os.rmdir(self.scratch)


# -- the bench ---------------------------------------------------------------------------------


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def masked(text: str) -> str:
    return VARYING.sub("N", text)


def bench_language(slug: str, info: dict, script: str, kiln: Kiln, config, runs: int | None, concurrency: int, log, payloads: dict, think_s: float = 0.0) -> dict:
    from kiln import langs
    from kiln.runtime import task_argv
    from kiln.sandbox.plan import cpu_rlimit_terms, fixed_rlimits, task_env
    from kiln.units import parse_duration_ms

    language = langs.LANGUAGES[slug]
    solution, checker, asserts = example(language)
    body = {"lang_slug": slug, "solution_text": solution, "timeout": TIMEOUT}
    files = [(language.solution_file, solution)]
    if checker is not None:
        body["checker_text"] = checker
        files.append((language.client_harness_file, checker))
    if asserts is not None:
        body["asserts"] = asserts  # a string: the bytes kiln writes, the bytes bare gets
        files.append((language.asserts_file, asserts))
    payload = payloads[slug] = json.dumps(body).encode()
    argv = list(task_argv(script, config))
    env = dict(task_env(path=config.sandbox_path, inherited=config.sandbox_env, language=language.env))
    # kiln-init's RLIMIT_CPU (limits.c cpu_limit_s) from the run's timeout, then the fixed ones
    per_second, extra = cpu_rlimit_terms(len(os.sched_getaffinity(0)))
    cpu_s = -(-parse_duration_ms(TIMEOUT) // 1000) * per_second + extra
    rlimits = ((resource.RLIMIT_CPU, cpu_s), *fixed_rlimits(info["pids_max"]))
    job = {
        "lower": str(config.workspace / slug),
        "tmp_size": info["tmp_size_bytes"],
        "inodes": config.tmp_inodes,
        "writable_dirs": [language.check_dir, *language.writable_dirs],
        "files": files,
        "argv": argv,
        "env": env,
    }

    def one(side: str) -> dict:
        kiln.settle(concurrency)
        time.sleep(think_s)  # a prestarted slot says warm before its command has loaded
        result = kiln.run(payload) if side == "kiln" else bare.run(job)
        if not result["ok"]:
            raise RuntimeError(f"{side} run failed: exit {result['exit']}, stderr {result['stderr'][-600:]!r}")
        return result

    row: dict = {"lang": slug, "argv": argv, "asserts": asserts is not None, "checker": checker is not None}
    samples = {"kiln": [], "bare": []}
    mismatches = 0
    bare = Bare([[int(r), v] for r, v in rlimits])
    try:
        warm = {"kiln": [], "bare": []}
        for i in range(WARMUP):
            for side in (("kiln", "bare") if i % 2 == 0 else ("bare", "kiln")):
                warm[side].append(one(side))
        if masked(warm["kiln"][-1]["stdout"]) != masked(warm["bare"][-1]["stdout"]):
            log(f"  {slug}: kiln's and bare stdout differ (masked):\n    kiln {warm['kiln'][-1]['stdout'][:300]!r}\n    bare {warm['bare'][-1]['stdout'][:300]!r}")
        warm_ms = median([r["wall_ms"] for r in warm["bare"]])
        n = runs or (SLOW_RUNS if warm_ms >= SLOW_MS else FAST_RUNS)
        log(f"  {slug}: warm-up bare median {warm_ms:.1f} ms -> {n} runs a side")
        for i in range(n):
            pair = {}
            for side in (("kiln", "bare") if i % 2 == 0 else ("bare", "kiln")):
                pair[side] = one(side)
                samples[side].append(pair[side])
            if masked(pair["kiln"]["stdout"]) != masked(pair["bare"]["stdout"]):
                mismatches += 1
    except Exception as error:  # noqa: BLE001 - one language failing does not stop the table
        row.update(error=str(error), verdict="error", runs=len(samples["bare"]))
        log(f"  {slug}: ERROR {error}")
        return row
    finally:
        bare.close()
    kiln_ms = [r["wall_ms"] for r in samples["kiln"]]
    bare_ms = [r["wall_ms"] for r in samples["bare"]]
    k, b = median(kiln_ms), median(bare_ms)
    added = k - b
    allowed = max(TARGET_MS, b * TARGET_PCT / 100)
    row.update(
        runs=len(kiln_ms),
        kiln_ms=round(k, 2),
        bare_ms=round(b, 2),
        added_ms=round(added, 2),
        added_pct=round(added / b * 100, 2),
        allowed_ms=round(allowed, 2),
        verdict="ok" if added < allowed else "over",
        paired_added_ms=round(median([x - y for x, y in zip(kiln_ms, bare_ms)]), 2),
        kiln_inside_ms=round(median([r["inside_ms"] for r in samples["kiln"]]), 2),
        kiln_cpu_ms=round(median([r["cpu_ms"] for r in samples["kiln"]]), 2),
        bare_cpu_ms=round(median([r["cpu_ms"] for r in samples["bare"]]), 2),
        kiln_iqr_ms=[round(q, 2) for q in _quartiles(kiln_ms)],
        bare_iqr_ms=[round(q, 2) for q in _quartiles(bare_ms)],
        stdout_mismatches=mismatches,
        samples={"kiln_ms": [round(v, 3) for v in kiln_ms], "bare_ms": [round(v, 3) for v in bare_ms], "kiln_inside_ms": [r["inside_ms"] for r in samples["kiln"]]},
    )
    log(f"  {slug}: kiln {k:.1f} ms, bare {b:.1f} ms, added {added:+.1f} ms ({added / b * 100:+.1f}%) {row['verdict']}")
    return row


def rate(port: int, payload: bytes, clients: int, seconds: float) -> dict:
    """Runs per second with `clients` keep-alive connections posting `payload` back to back."""

    def run_once(kiln: Kiln) -> dict:
        result = kiln.run(payload)
        if not result["ok"]:
            raise RuntimeError(f"exit {result['exit']}: {result['stderr'][-200:]!r}")
        return result

    done, errors, elapsed = load(lambda: Kiln(port), run_once, clients, seconds)
    return {"runs_per_s": round(len(done) / elapsed, 2), "rate_errors": len(errors), "first_rate_error": errors[0] if errors else None}


def measure_rates(rows: list[dict], payloads: dict, env: dict, clients: int, seconds: float, log) -> None:
    """The issue's rate target, per language: runs/s at `clients` connections (a server with
    as many slots) against the rate the CPUs allow the bare command (CPUs / its CPU time)."""
    from kilntest import Server

    cpus = len(os.sched_getaffinity(0))
    server = Server({**env, "RUN_CONCURRENCY": str(clients)}).wait_ready(180)
    try:
        for row in rows:
            if "error" in row:
                continue
            measured = rate(server.port, payloads[row["lang"]], clients, seconds)
            bare_rate = cpus / (row["bare_cpu_ms"] / 1000)
            row.update(measured, bare_cpu_bound_runs_per_s=round(bare_rate, 2), rate_vs_bare=round(measured["runs_per_s"] / bare_rate, 3))
            log(f"  {row['lang']}: {measured['runs_per_s']} runs/s at {clients} clients, bare CPU-bound {bare_rate:.1f}/s: {row['rate_vs_bare']:.2f}" + (f", {measured['rate_errors']} errors" if measured["rate_errors"] else ""))
    finally:
        server.stop()


def _quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return (values[0], values[0]) if values else (float("nan"), float("nan"))
    q = statistics.quantiles(values, n=4)
    return q[0], q[2]


def print_table(rows: list[dict]) -> None:
    head = ["lang", "runs", "kiln ms", "bare ms", "added ms", "added %", "allowed ms", "verdict", "kiln inside ms", "kiln cpu ms", "bare cpu ms"]
    keys = ["lang", "runs", "kiln_ms", "bare_ms", "added_ms", "added_pct", "allowed_ms", "verdict", "kiln_inside_ms", "kiln_cpu_ms", "bare_cpu_ms"]
    if any("runs_per_s" in row for row in rows):
        head += ["runs/s", "bare CPU-bound runs/s", "rate vs bare"]
        keys += ["runs_per_s", "bare_cpu_bound_runs_per_s", "rate_vs_bare"]
    cells = [[str(row.get(k, "-")) for k in keys] for row in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(head)]
    print("  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(head, widths))))
    for c in cells:
        print("  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(c, widths))))
    for row in rows:
        if "error" in row:
            print(f"{row['lang']}: {row['error']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, help=f"timed runs per side for every language (default: {SLOW_RUNS} if the warm-up takes >= {SLOW_MS:.0f} ms, else {FAST_RUNS})")
    parser.add_argument("--langs", help="comma-separated slugs (default: every language the server serves)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "langs.json")
    parser.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE", help="extra kiln setting, for A/B runs (e.g. RUN_CGROUP=off); repeatable")
    parser.add_argument("--rate-seconds", type=float, default=0, help="also measure each language's rate at --rate-clients connections for this long (issue 6's rate target)")
    parser.add_argument("--rate-clients", type=int, default=8)
    parser.add_argument("--think-ms", type=float, default=0, help="a pause before every run of either side, as a player's between two checks: a prestarted slot is 'warm' once its command started, and without a pause the next run may find it still loading")
    parser.add_argument("--bare-worker", nargs=2, metavar=("DIR", "RLIMITS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare_worker:
        return worker(*args.bare_worker)
    if os.geteuid() != 0:
        print("bench/langs.py needs root (kiln serve, mounts)", file=sys.stderr)
        return 2
    if not os.path.isdir(SANDBOX):
        print(f"{SANDBOX} does not exist on this host: the bare runs mount their workspace there (mkdir {SANDBOX})", file=sys.stderr)
        return 2

    from kiln import config as config_module
    from kilntest import Server

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    concurrency = 2
    env = {"RUN_CONCURRENCY": str(concurrency), "RUN_LOG_FORMAT": "json"}
    if args.langs:
        env["RUN_LANGS"] = args.langs
    env.update(item.split("=", 1) for item in args.server_env)
    started_at = time.time()
    load_start = os.getloadavg()
    log(f"load average {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f}; starting kiln")
    server = Server(env).wait_ready(180)
    rows: list[dict] = []
    payloads: dict[str, bytes] = {}
    try:
        config = config_module.load(server.env, REPO)
        kiln = Kiln(server.port)
        served = json.loads(kiln.get("/languages"))
        for unserved in served["unserved"]:
            if not args.langs:
                log(f"  {unserved['slug']}: not served ({unserved['reason']})")
        scripts = {r["slug"]: r["command"] for r in server.logged("language")}
        for info in served["languages"]:
            slug = info["slug"]
            log(f"{slug}: {info['version']}")
            rows.append(bench_language(slug, info, scripts[slug], kiln, config, args.runs, concurrency, log, payloads, args.think_ms / 1000))
    finally:
        server.stop()
    if args.rate_seconds:
        measure_rates(rows, payloads, env, args.rate_clients, args.rate_seconds, log)
    load_end = os.getloadavg()
    print_table(rows)
    print(f"target: added < max({TARGET_MS:.0f} ms, {TARGET_PCT:.0f}% of bare); "
          f"load average at start {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f}, at end {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}; "
          f"{len(os.sched_getaffinity(0))} CPUs; {time.time() - started_at:.0f} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        **run_facts(started_at, load_start, load_end),
        "target": {"added_pct_max": TARGET_PCT, "added_ms_max": TARGET_MS, "rule": "added_ms < max(added_ms_max, bare_ms * added_pct_max / 100)"},
        "server_env": env,
        "method": {"rate_clients": args.rate_clients if args.rate_seconds else None, "rate_seconds": args.rate_seconds or None, "concurrency": concurrency, "warmup_per_side": WARMUP, "timeout": TIMEOUT, "bare_uid": BARE_UID, "alternating": "kiln/bare order flips every pair", "settle": "before every run, until kiln's slots are all warm (GET /metrics)", "think_ms": args.think_ms},
        "results": rows,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    log(f"wrote {args.out}")
    return 0 if rows and all(r["verdict"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
