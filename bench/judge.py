"""POST /judge against the same binary run bare: what one more test costs, what a cached checker
costs, and how soon a judge request with a cached build starts its first test (issue 17's
performance targets).

Starts one kiln (root needed; RUN_CONCURRENCY 16 and RUN_JUDGE_PARALLEL 8 unless told), then:

1. **The marginal cost of a test.** C++ a+b on N tests (default 1000), 8 in parallel: a request
   with a fresh build (the source carries the round's nonce) and the same request again (a cached
   build: `compile.cached` true), each timed by the client around the HTTP request; per test
   (request - build) / N, the build being `compile.stats.wall_ms` (0 when cached). Against it,
   bare: the same source built with the cpp workspace's own `build` command (`make -n -s
   build` of langs/cpp, run by `sh -e -c` in a copy of the workspace whose entries are links to
   langs/cpp's), then that binary run N times, 8 at a time (posix_spawn of the argv kiln's exec
   job runs, the workspace's `exec` command, here `judge/main` itself; stdin a file of the
   test's input, stdout a file compared by tokens as kiln compares). Kiln and bare rounds alternate
   (the order flips every round), and kiln's slots are all warm again before each side starts.
2. **A cached checker.** 1-test requests on cached C++ solutions: without a checker, with a
   cached C++ checker, with a fresh one (a new nonce each round); on a solution that exits 1
   (RE: the checker is not run, so only its build or cache lookup is left) and on a+b (AC: the
   checker runs). Cached-checker build time = (cached checker, RE) - (no checker, RE).
3. **The time to the first test.** For every served language that judges (or `--langs`): its
   a+b (tests/langs/judge/<slug>/ab) built once, then 1-test requests on the cached build; the
   request's wall time (client) and the test's own `stats.wall_ms` (init's clock: from just
   before the spawn to the reap). What is left, request - test, is kiln's path outside the
   test: before its spawn and after its end (the answer, the comparison, the JSON). What the
   task does between its spawn and its exec (its user, filter and cgroups) falls inside the
   test's wall_ms, so the C++ probe measures the start directly: an a+b that prints when its
   main() began, against the client's clock when it sent the request, and the same binary
   spawned bare (spawn to main(): the exec and the dynamic loading, which the test pays too),
   alternating; kiln's share is the difference.

Targets (issue 17): a test's marginal cost within 0.5 ms of the bare exec per test; the
1000-test request under 3 s with its build, under 1.5 s cached; a cached checker adds no build
time; with a cached build, the first test starts within 5 ms.

CPU: for each timed kiln request and bare batch, /proc before and after (the front, the zygote
with its reaped slots and tasks, the language templates, this bench, the whole machine): kiln's
CPU per test, and the CPU of everything else on the machine meanwhile (other users' load).

    .venv/bin/python bench/judge.py [--tests 1000] [--rounds 5] [--quick] [--sections 1,2,3]

Writes bench/results/judge.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))
from client import KilnClient, run_facts  # noqa: E402 - bench/ is this script's folder
from cpu import machine_busy, process_times, templates  # noqa: E402

CPP_WORKSPACE = REPO / "langs" / "cpp"
JUDGE_PROGRAMS = REPO / "tests" / "langs" / "judge"
AB_CPP = "#include <iostream>\nint main() { long a, b; std::cin >> a >> b; std::cout << a + b << '\\n'; }\n"
RE_CPP = "int main() { return 1; }\n"
CHECKER_CPP = (
    "#include <fstream>\n#include <iostream>\nint main(int argc, char **argv) {\n"
    "  std::ifstream in(argv[1]), out(argv[2]), ans(argv[3]); long a, b, got = 0, want = 0;\n"
    "  in >> a >> b; out >> got; ans >> want;\n"
    "  if (got != want) { std::cout << \"expected \" << want << \", got \" << got; return 1; }\n"
    "  return 0;\n}\n"
)
ONE_TEST = [{"stdin": "1 2\n", "expected": "3"}]
# a+b that first prints when its main() began (CLOCK_REALTIME: no time namespace in a slot)
PROBE_CPP = (
    "#include <cstdio>\n#include <ctime>\nint main() {\n  timespec t; clock_gettime(CLOCK_REALTIME, &t);\n"
    "  long a, b; if (std::scanf(\"%ld %ld\", &a, &b) != 2) return 1;\n"
    "  std::printf(\"%lld.%09ld\\n%ld\\n\", (long long)t.tv_sec, t.tv_nsec, a + b);\n}\n"
)
# what a task gets from kiln: nothing of this machine's environment (as bench/latency.py)
BARE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
TARGET_ADDED_PER_TEST_MS = 0.5
TARGET_FRESH_S, TARGET_CACHED_S = 3.0, 1.5
TARGET_FIRST_TEST_MS = 5.0


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def r3(value):
    return None if value is None else round(value, 3)


# -- CPU, from /proc ---------------------------------------------------------------------------


class Cpu:
    """CPU seconds of kiln (front; zygote with its reaped slots and tasks; templates), of this
    bench, and of the whole machine, sampled before and after something."""

    def __init__(self, server):
        self.pids = server.pids()

    def sample(self) -> dict:
        front = process_times(self.pids["front"])
        zygote = process_times(self.pids["zygote"])
        return {
            "front": front["own"],
            "zygote": zygote["own"],
            "slots": zygote["children"],
            "templates": {pid: t["own"] for pid, t in templates(self.pids["zygote"]).items()},
            "bench": _rusage_s(),  # this process and its reaped children (the bare worker, alive, reports its own)
            "machine": machine_busy(),
            "at": time.monotonic(),
        }

    @staticmethod
    def delta(before: dict, after: dict) -> dict:
        d = {key: after[key] - before[key] for key in ("front", "zygote", "slots", "bench", "machine", "at")}
        d["templates"] = sum(after["templates"][pid] - t for pid, t in before["templates"].items() if pid in after["templates"])
        d["kiln"] = d["front"] + d["zygote"] + d["slots"] + d["templates"]
        return d


# -- kiln ----------------------------------------------------------------------------------------


class Kiln(KilnClient):
    def judge(self, body: dict) -> tuple[float, dict]:
        """(seconds from sending the request to the end of the answer, the answer)."""
        return self.post("/judge", json.dumps(body).encode())


# -- bare ----------------------------------------------------------------------------------------


def bare_worker() -> int:
    """A child of its own (so that its wait4(-1) reaps only its tasks): per line of stdin, a batch
    {argv, cwd, inputs, expected, parallel}: every input run through argv, `parallel` at a time,
    stdout to a file per lane, compared by tokens. Answers {wall_s, cpu_ms (each run's),
    worker_cpu_s (the worker's and its runs'), mismatches, failed}."""
    from kiln.judge import compare

    for line in sys.stdin:
        job = json.loads(line)
        inputs, expected = job["inputs"], [e.encode() for e in job["expected"]]
        lanes = [os.path.join(job["scratch"], f"lane{k}.out") for k in range(job["parallel"])]
        env = {**BARE_ENV, "HOME": job["cwd"]}
        os.chdir(job["cwd"])
        free = list(range(job["parallel"]))
        running: dict[int, tuple[int, int]] = {}
        cpu_ms, mismatches, failed = [], 0, 0
        cpu_before = _rusage_s()
        started = time.perf_counter()
        spawned: dict[int, float] = {}
        walls = []
        nxt = 0
        while nxt < len(inputs) or running:
            while free and nxt < len(inputs):
                lane = free.pop()
                actions = [
                    (os.POSIX_SPAWN_OPEN, 0, inputs[nxt], os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 1, lanes[lane], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
                    (os.POSIX_SPAWN_OPEN, 2, "/dev/null", os.O_WRONLY, 0),
                ]
                pid = os.posix_spawn(job["argv"][0], job["argv"], env, file_actions=actions)
                running[pid] = (nxt, lane)
                spawned[pid] = time.perf_counter()
                nxt += 1
            pid, status, usage = os.wait4(-1, 0)
            walls.append((time.perf_counter() - spawned.pop(pid)) * 1000)
            index, lane = running.pop(pid)
            cpu_ms.append((usage.ru_utime + usage.ru_stime) * 1000)
            if os.waitstatus_to_exitcode(status) != 0:
                failed += 1
            else:
                with open(lanes[lane], "rb") as f:
                    if not compare.same("tokens", f.read(), expected[index]):
                        mismatches += 1
            free.append(lane)
        wall = time.perf_counter() - started
        os.chdir("/")
        print(json.dumps({"wall_s": wall, "cpu_ms": cpu_ms, "wall_ms": walls, "worker_cpu_s": _rusage_s() - cpu_before, "mismatches": mismatches, "failed": failed}), flush=True)
    return 0


def _rusage_s() -> float:
    """CPU seconds of this process and of its reaped children."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class Bare:
    def __init__(self, scratch: str):
        self.scratch = scratch
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--bare-worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def batch(self, argv: list[str], cwd: str, inputs: list[str], expected: list[str], parallel: int) -> dict:
        self.proc.stdin.write(json.dumps({"argv": argv, "cwd": cwd, "inputs": inputs, "expected": expected, "parallel": parallel, "scratch": self.scratch}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the bare worker exited ({self.proc.wait()})")
        return json.loads(line)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(30)


def cpp_workspace_copy(folder: Path) -> Path:
    """langs/cpp as the build sees it in a sandbox: its entries (links to the real ones: the
    precompiled prelude is 140 MB) and an empty judge/ for the submission."""
    folder.mkdir()
    for entry in CPP_WORKSPACE.iterdir():
        if entry.name != "judge":
            (folder / entry.name).symlink_to(entry)
    (folder / "judge").mkdir()
    return folder


def bare_build(workspace: Path, script: str, source: str) -> float:
    """Seconds of the cpp workspace's build command on `source`, run as kiln's build job runs it."""
    (workspace / "judge" / "main").unlink(missing_ok=True)
    (workspace / "judge" / "main.cpp").write_text(source)
    started = time.perf_counter()
    done = subprocess.run(["/bin/sh", "-e", "-c", script], cwd=workspace, env={**BARE_ENV, "HOME": str(workspace)}, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0 or not (workspace / "judge" / "main").is_file():
        raise RuntimeError(f"bare build failed ({done.returncode}): {done.stderr[-1000:]}")
    return elapsed


# -- 1. the marginal cost of a test ---------------------------------------------------------------


def section_marginal(kiln: Kiln, cpu: Cpu, config, args, scratch: Path, nonce: str) -> dict:
    from kiln.runtime import read_commands, task_argv, taking_arguments

    n, parallel, slots = args.tests, args.parallel, args.concurrency
    commands = read_commands(CPP_WORKSPACE)
    exec_argv = list(taking_arguments(task_argv(commands.exec, config)))
    workspace = cpp_workspace_copy(scratch / "cpp")
    rng = random.Random(17)
    pairs = [(rng.randint(-(10**9), 10**9), rng.randint(-(10**9), 10**9)) for _ in range(n)]
    tests = [{"stdin": f"{a} {b}\n", "expected": str(a + b)} for a, b in pairs]
    inputs_dir = scratch / "inputs"
    inputs_dir.mkdir()
    inputs = []
    for i, test in enumerate(tests):
        path = inputs_dir / f"{i}.in"
        path.write_text(test["stdin"])
        inputs.append(str(path))
    expected = [t["expected"] for t in tests]
    # bare runs what kiln's exec job runs: its argv (a relative path, or sh -e -c), at the workspace
    argv = exec_argv if exec_argv[0].startswith("/") else [str(workspace / exec_argv[0]), *exec_argv[1:]]
    log(f"1. marginal cost: C++ a+b, {n} tests, {parallel} at a time, {args.rounds} rounds; build `{commands.build}`, exec argv {exec_argv}")

    bare = Bare(str(scratch))
    rounds = []

    def kiln_side(source: str, row: dict) -> None:
        for kind in ("fresh", "cached"):
            kiln.settle(slots)
            before = cpu.sample()
            wall, answer = kiln.judge({"lang_slug": "cpp", "solution_text": source, "tests": tests})
            kiln.settle(slots)  # the slots that ran it reaped (replaced): their CPU is the zygote's children's
            used = Cpu.delta(before, cpu.sample())
            if answer["verdict"] != "AC" or answer["passed"] != n:
                bad = next((t for t in answer["tests"] if t["verdict"] != "AC"), None)
                raise RuntimeError(f"kiln {kind}: {answer['verdict']}, {answer['passed']}/{n} passed; first failure {bad}; compile {answer['compile']}")
            if answer["compile"]["cached"] != (kind == "cached"):
                raise RuntimeError(f"kiln {kind}: compile.cached is {answer['compile']['cached']}")
            build_ms = 0.0 if kind == "cached" else answer["compile"]["stats"]["wall_ms"]
            test_stats = [t["stats"] for t in answer["tests"]]
            row[f"kiln_{kind}"] = {
                "wall_s": wall,
                "server_wall_ms": answer["stats"]["wall_ms"],
                "build_ms": build_ms,
                "build_cpu_ms": answer["compile"]["stats"]["cpu_ms"],
                "per_test_ms": (wall * 1000 - build_ms) / n,
                "test_wall_ms": median([s["wall_ms"] for s in test_stats]),
                "test_cpu_ms": median([s["cpu_ms"] for s in test_stats]),
                "kiln_cpu_per_test_ms": (used["kiln"] * 1000 - (answer["compile"]["stats"]["cpu_ms"] if kind == "fresh" else 0)) / n,
                # where it went, per test: the front, the zygote, the slots (their inits, warm-up
                # included, and their tasks: reaped), the templates; the tests' own CPU (cgroups)
                "cpu_per_test_ms": {k: used[k] * 1000 / n for k in ("front", "zygote", "slots", "templates")} | {"tests": sum(st["cpu_ms"] for st in test_stats) / n},
                "cpu_s": {k: round(v, 3) for k, v in used.items() if k != "at"},
                "others_cores": (used["machine"] - used["kiln"] - used["bench"]) / used["at"],
            }

    def bare_side(source: str, row: dict) -> None:
        kiln.settle(slots)
        row["bare_build_s"] = bare_build(workspace, commands.build, source)
        before = cpu.sample()
        done = bare.batch(argv, str(workspace), inputs, expected, parallel)
        used = Cpu.delta(before, cpu.sample())
        if done["failed"] or done["mismatches"]:
            raise RuntimeError(f"bare: {done['failed']} failed, {done['mismatches']} wrong answers")
        row["bare"] = {
            "wall_s": done["wall_s"],
            "per_test_ms": done["wall_s"] * 1000 / n,
            "test_wall_ms": median(done["wall_ms"]),
            "test_cpu_ms": median(done["cpu_ms"]),
            "cpu_per_test_ms": sum(done["cpu_ms"]) / n,
            "worker_cpu_per_test_ms": (done["worker_cpu_s"] * 1000 - sum(done["cpu_ms"])) / n,  # the runner itself, its runs left out
            "others_cores": (used["machine"] - used["bench"] - done["worker_cpu_s"] - used["kiln"]) / used["at"],
        }

    try:
        for r in range(args.rounds):
            source = AB_CPP + f"// bench/judge.py {nonce} round {r}\n"
            row: dict = {"round": r, "order": "kiln first" if r % 2 == 0 else "bare first"}
            for side in (("kiln", "bare") if r % 2 == 0 else ("bare", "kiln")):
                (kiln_side if side == "kiln" else bare_side)(source, row)
            rounds.append(row)
            f, c, b = row["kiln_fresh"], row["kiln_cached"], row["bare"]
            log(
                f"  round {r}: kiln fresh {f['wall_s']:.2f} s (build {f['build_ms']:.0f} ms, {f['per_test_ms']:.3f} ms/test), cached {c['wall_s']:.2f} s ({c['per_test_ms']:.3f} ms/test, CPU {c['kiln_cpu_per_test_ms']:.2f}); "
                f"bare build {row['bare_build_s']:.2f} s, exec {b['per_test_ms']:.3f} ms/test (CPU {b['cpu_per_test_ms']:.2f}); others' load {c['others_cores']:.2f} / {b['others_cores']:.2f} cores"
            )
    finally:
        bare.close()

    def med(side: str, key: str):
        return median([row[side][key] for row in rounds])

    summary = {
        "tests": n,
        "parallel": parallel,
        "rounds": len(rounds),
        "kiln_fresh_wall_s": r3(med("kiln_fresh", "wall_s")),
        "kiln_fresh_build_ms": r3(med("kiln_fresh", "build_ms")),
        "kiln_fresh_per_test_ms": r3(med("kiln_fresh", "per_test_ms")),
        "kiln_cached_wall_s": r3(med("kiln_cached", "wall_s")),
        "kiln_cached_per_test_ms": r3(med("kiln_cached", "per_test_ms")),
        "kiln_test_wall_ms": r3(med("kiln_cached", "test_wall_ms")),
        "kiln_test_cpu_ms": r3(med("kiln_cached", "test_cpu_ms")),
        "kiln_cpu_per_test_ms": r3(med("kiln_cached", "kiln_cpu_per_test_ms")),
        "bare_build_s": r3(median([row["bare_build_s"] for row in rounds])),
        "bare_argv": argv,
        "bare_per_test_ms": r3(med("bare", "per_test_ms")),
        "bare_test_wall_ms": r3(med("bare", "test_wall_ms")),
        "bare_test_cpu_ms": r3(med("bare", "test_cpu_ms")),
        "kiln_cpu_breakdown_per_test_ms": {k: r3(median([row["kiln_cached"]["cpu_per_test_ms"][k] for row in rounds])) for k in ("front", "zygote", "slots", "templates", "tests")},
        "bare_cpu_per_test_ms": r3(med("bare", "cpu_per_test_ms")),
        "bare_worker_cpu_per_test_ms": r3(med("bare", "worker_cpu_per_test_ms")),
        "others_cores_kiln": r3(med("kiln_cached", "others_cores")),
        "others_cores_bare": r3(med("bare", "others_cores")),
    }
    # paired per round: kiln's cached per-test cost against that round's bare
    summary["added_per_test_ms"] = r3(median([row["kiln_cached"]["per_test_ms"] - row["bare"]["per_test_ms"] for row in rounds]))
    summary["added_per_test_fresh_ms"] = r3(median([row["kiln_fresh"]["per_test_ms"] - row["bare"]["per_test_ms"] for row in rounds]))
    summary["ratio_per_test"] = r3(median([row["kiln_cached"]["per_test_ms"] / row["bare"]["per_test_ms"] for row in rounds]))
    summary["ratio_build"] = r3(median([row["kiln_fresh"]["build_ms"] / 1000 / row["bare_build_s"] for row in rounds]))
    summary["bare_whole_s"] = r3(median([row["bare_build_s"] + row["bare"]["wall_s"] for row in rounds]))
    summary["added_cpu_per_test_ms"] = r3(median([row["kiln_cached"]["kiln_cpu_per_test_ms"] - row["bare"]["cpu_per_test_ms"] for row in rounds]))
    cores = len(os.sched_getaffinity(0))
    # what the CPU alone allows on this machine's cores, whatever else ran meanwhile
    summary["cpu_bound_per_test_ms"] = {"kiln": r3(summary["kiln_cpu_per_test_ms"] / cores), "bare": r3(summary["bare_cpu_per_test_ms"] / cores)}
    full = n == 1000  # the request targets are for 1000 tests (None: not measured)
    summary["targets"] = {
        f"added per test <= {TARGET_ADDED_PER_TEST_MS} ms": summary["added_per_test_ms"] <= TARGET_ADDED_PER_TEST_MS,
        f"1000 tests with the build < {TARGET_FRESH_S} s": summary["kiln_fresh_wall_s"] < TARGET_FRESH_S if full else None,
        f"1000 tests cached < {TARGET_CACHED_S} s": summary["kiln_cached_wall_s"] < TARGET_CACHED_S if full else None,
    }
    return {"summary": summary, "rounds": rounds}


# -- 2. a cached checker ----------------------------------------------------------------------------


def section_checker(kiln: Kiln, args, nonce: str) -> dict:
    slots = args.concurrency
    checker = {"lang_slug": "cpp", "source": CHECKER_CPP}

    def body(solution: str, with_checker: dict | None) -> dict:
        b = {"lang_slug": "cpp", "solution_text": solution, "tests": ONE_TEST}
        if with_checker:
            b.update(compare="checker", checker=with_checker)
        return b

    # untimed: the two solutions and the checker built once (cached from here on)
    for warm in (body(AB_CPP, None), body(RE_CPP, None), body(AB_CPP, checker)):
        kiln.judge(warm)
    log(f"2. cached checker: 1-test requests, {args.checker_rounds} rounds")
    kinds = {
        "none_re": (RE_CPP, lambda r: None, "RE"),
        "cached_re": (RE_CPP, lambda r: checker, "RE"),
        "fresh_re": (RE_CPP, lambda r: {"lang_slug": "cpp", "source": CHECKER_CPP + f"// bench/judge.py {nonce} checker {r}\n"}, "RE"),
        "none_ac": (AB_CPP, lambda r: None, "AC"),
        "cached_ac": (AB_CPP, lambda r: checker, "AC"),
    }
    samples: dict[str, list[dict]] = {k: [] for k in kinds}
    names = list(kinds)
    for r in range(args.checker_rounds):
        order = names[r % len(names) :] + names[: r % len(names)]  # rotated every round
        for kind in order:
            solution, make_checker, verdict = kinds[kind]
            kiln.settle(slots)
            wall, answer = kiln.judge(body(solution, make_checker(r)))
            test = answer["tests"][0]
            if answer["verdict"] != verdict or not answer["compile"]["cached"]:
                raise RuntimeError(f"checker {kind}: verdict {answer['verdict']} (want {verdict}), compile.cached {answer['compile']['cached']}")
            if kind == "cached_ac" and test["checker_message"] is None:
                raise RuntimeError("the checker did not run")
            samples[kind].append({"wall_ms": wall * 1000, "server_wall_ms": answer["stats"]["wall_ms"], "test_wall_ms": test["stats"]["wall_ms"]})
    med = {k: median([s["wall_ms"] for s in v]) for k, v in samples.items()}
    srv = {k: median([s["server_wall_ms"] for s in v]) for k, v in samples.items()}

    def paired(a: str, b: str) -> float:
        return median([x["wall_ms"] - y["wall_ms"] for x, y in zip(samples[a], samples[b])])

    def quartiles(kind: str) -> list[float]:
        values = [s["wall_ms"] for s in samples[kind]]
        return [round(q, 2) for q in statistics.quantiles(values, n=4)[::2]] if len(values) > 1 else values

    summary = {
        "rounds": args.checker_rounds,
        "wall_ms": {k: r3(v) for k, v in med.items()},
        "server_wall_ms": {k: r3(v) for k, v in srv.items()},
        "iqr_ms": {k: quartiles(k) for k in samples},
        "cached_checker_build_ms": r3(paired("cached_re", "none_re")),
        "cached_checker_build_server_ms": r3(median([x["server_wall_ms"] - y["server_wall_ms"] for x, y in zip(samples["cached_re"], samples["none_re"])])),
        "fresh_checker_build_ms": r3(paired("fresh_re", "cached_re")),
        "checker_run_ms": r3(paired("cached_ac", "none_ac")),
    }
    # "no build time": no build ran. A build is ~1 s here; a 1-test request's noise on this VM
    # is several ms, so the added time is judged against 1 % of a fresh build, and printed
    summary["targets"] = {"a cached checker adds no build time (added < 1 % of a fresh checker build)": abs(summary["cached_checker_build_ms"]) < 0.01 * summary["fresh_checker_build_ms"]}
    log(
        f"  no checker {med['none_re']:.1f} ms, cached checker {med['cached_re']:.1f} ms (adds {summary['cached_checker_build_ms']:+.2f}), "
        f"fresh checker {med['fresh_re']:.0f} ms (its build {summary['fresh_checker_build_ms']:.0f}); checker run per test {summary['checker_run_ms']:+.1f} ms"
    )
    return {"summary": summary, "samples": samples}


# -- 3. the time to the first test ---------------------------------------------------------------


def program(slug: str) -> tuple[str, dict[str, str]]:
    from kiln import langs

    folder = JUDGE_PROGRAMS / slug / "ab"
    judge_file = langs.LANGUAGES[slug].judge_file
    return (folder / judge_file).read_text(), {p.name: p.read_text() for p in sorted(folder.iterdir()) if p.name != judge_file}


def probe_first_test(kiln: Kiln, config, args, scratch: Path) -> dict:
    """C++ only, directly: how long after the client sent a 1-test request (cached build) the
    test's main() begins (it prints the time), against the same binary spawned bare (posix_spawn
    to main(): the exec and the dynamic loading, the binary's own start), alternating."""
    from kiln.runtime import read_commands, task_argv, taking_arguments

    commands = read_commands(CPP_WORKSPACE)
    exec_argv = list(taking_arguments(task_argv(commands.exec, config)))
    workspace = cpp_workspace_copy(scratch / "probe")
    bare_build(workspace, commands.build, PROBE_CPP)
    argv = exec_argv if exec_argv[0].startswith("/") else [str(workspace / exec_argv[0]), *exec_argv[1:]]
    stdin = workspace / "probe.in"
    stdin.write_text("1 2\n")
    out = workspace / "probe.out"
    body = {"lang_slug": "cpp", "solution_text": PROBE_CPP, "tests": [{"stdin": "1 2\n"}], "compare": "none"}
    kiln.judge(body)  # the build, cached from here on
    kiln_ms, bare_ms, after_ms, test_wall_ms = [], [], [], []
    for i in range(args.first_runs):
        for side in (("kiln", "bare") if i % 2 == 0 else ("bare", "kiln")):
            kiln.settle(args.concurrency)
            if side == "kiln":
                sent = time.time()
                wall, answer = kiln.judge(body)
                test = answer["tests"][0]
                if not answer["compile"]["cached"] or test["exit_code"] != 0:
                    raise RuntimeError(f"probe: {test}")
                kiln_ms.append((float(test["stdout"].split()[0]) - sent) * 1000)
                # after main() began: the rest of the request (the test's end, its answer)
                after_ms.append(wall * 1000 - kiln_ms[-1])
                test_wall_ms.append(test["stats"]["wall_ms"])
            else:
                actions = [(os.POSIX_SPAWN_OPEN, 0, str(stdin), os.O_RDONLY, 0), (os.POSIX_SPAWN_OPEN, 1, str(out), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)]
                os.chdir(workspace)
                try:
                    sent = time.time()
                    pid = os.posix_spawn(argv[0], argv, {**BARE_ENV, "HOME": str(workspace)}, file_actions=actions)
                    os.waitpid(pid, 0)
                finally:
                    os.chdir("/")
                bare_ms.append((float(out.read_text().split()[0]) - sent) * 1000)
    row = {"runs": len(kiln_ms), "kiln_ms": r3(median(kiln_ms)), "bare_ms": r3(median(bare_ms)), "kiln_max_ms": r3(max(kiln_ms)), "after_main_ms": r3(median(after_ms)), "test_wall_ms": r3(median(test_wall_ms)),
           "samples": {"kiln": kiln_ms, "bare": bare_ms, "after_main": after_ms, "test_wall": test_wall_ms}}
    row["added_ms"] = r3(row["kiln_ms"] - row["bare_ms"])
    # the test starts at its spawn: what follows until main() (the exec, the dynamic loading) is
    # the binary's own start, which bare pays too
    row["verdict"] = "ok" if row["added_ms"] < TARGET_FIRST_TEST_MS else "over"
    log(f"  cpp probe: main() begins {row['kiln_ms']:.2f} ms after the request is sent (bare spawn to main() {row['bare_ms']:.2f} ms: kiln's share {row['added_ms']:.2f}; worst {row['kiln_max_ms']:.2f}) {row['verdict']}")
    return row


def section_first_test(kiln: Kiln, args) -> dict:
    served = json.loads(kiln.get("/languages"))["languages"]
    slugs = [l["slug"] for l in served if l["judge"] and (not args.langs or l["slug"] in args.langs.split(","))]
    log(f"3. first test: {', '.join(slugs)}; {args.first_runs} cached 1-test requests each")
    rows = []
    for slug in slugs:
        row: dict = {"lang": slug}
        try:
            solution, files = program(slug)
            body = {"lang_slug": slug, "solution_text": solution, "tests": [{"stdin": "1 2\n", "expected": "3"}], "compile_timeout": "2m", "limits": {"time": "10s", "wall_time": "30s"}}
            if files:
                body["files"] = files
            kiln.settle(args.concurrency)
            wall, answer = kiln.judge(body)
            if answer["verdict"] != "AC":
                raise RuntimeError(f"{answer['verdict']}: compile {answer['compile']['stderr'][-300:]!r}, test {answer['tests'][0]}")
            row.update(build_ms=answer["compile"]["stats"]["wall_ms"], fresh_wall_ms=round(wall * 1000, 1))
            samples = []
            for _ in range(args.first_runs):
                kiln.settle(args.concurrency)
                wall, answer = kiln.judge(body)
                test = answer["tests"][0]
                if answer["verdict"] != "AC" or not answer["compile"]["cached"]:
                    raise RuntimeError(f"cached run: {answer['verdict']}, compile.cached {answer['compile']['cached']}")
                samples.append({"wall_ms": wall * 1000, "server_wall_ms": answer["stats"]["wall_ms"], "test_wall_ms": test["stats"]["wall_ms"], "test_cpu_ms": test["stats"]["cpu_ms"]})
            before = [s["wall_ms"] - s["test_wall_ms"] for s in samples]
            row.update(
                runs=len(samples),
                wall_ms=r3(median([s["wall_ms"] for s in samples])),
                server_wall_ms=r3(median([s["server_wall_ms"] for s in samples])),
                test_wall_ms=r3(median([s["test_wall_ms"] for s in samples])),
                test_cpu_ms=r3(median([s["test_cpu_ms"] for s in samples])),
                outside_test_ms=r3(median(before)),
                outside_test_server_ms=r3(median([s["server_wall_ms"] - s["test_wall_ms"] for s in samples])),
                outside_test_max_ms=r3(max(before)),
                verdict="ok" if median(before) < TARGET_FIRST_TEST_MS else "over",
                samples=samples,
            )
            log(f"  {slug}: request {row['wall_ms']:.1f} ms, test {row['test_wall_ms']:.1f} ms -> {row['outside_test_ms']:.2f} ms outside the test ({row['verdict']}); build {row['build_ms']:.0f} ms")
        except Exception as error:  # noqa: BLE001 - one language failing does not stop the table
            row.update(error=str(error)[:500], verdict="error")
            log(f"  {slug}: ERROR {error}")
        rows.append(row)
    return {"rows": rows, "target_ms": TARGET_FIRST_TEST_MS}


# -- the report ----------------------------------------------------------------------------------


def table(head: list[str], rows: list[list]) -> None:
    cells = [[("-" if v is None else str(v)) for v in row] for row in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(head)]
    print("  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(head, widths))))
    for c in cells:
        print("  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(c, widths))))


def report(results: dict) -> None:
    if "marginal" in results:
        s = results["marginal"]["summary"]
        print(f"\n1. marginal cost of a test: C++ a+b, {s['tests']} tests, {s['parallel']} at a time, medians of {s['rounds']} rounds (kiln and bare alternating)")
        table(
            ["", "kiln", "bare", "kiln - bare", "kiln / bare"],
            [
                ["whole request, fresh build (s)", s["kiln_fresh_wall_s"], s["bare_whole_s"], r3(s["kiln_fresh_wall_s"] - s["bare_whole_s"]), r3(s["kiln_fresh_wall_s"] / s["bare_whole_s"])],
                ["whole request, cached build (s)", s["kiln_cached_wall_s"], r3(s["bare_per_test_ms"] * s["tests"] / 1000), None, None],
                ["build (ms)", s["kiln_fresh_build_ms"], r3(s["bare_build_s"] * 1000), r3(s["kiln_fresh_build_ms"] - s["bare_build_s"] * 1000), s["ratio_build"]],
                ["per test, fresh: (request - build) / N (ms)", s["kiln_fresh_per_test_ms"], s["bare_per_test_ms"], s["added_per_test_fresh_ms"], None],
                ["per test, cached: request / N (ms)", s["kiln_cached_per_test_ms"], s["bare_per_test_ms"], s["added_per_test_ms"], s["ratio_per_test"]],
                ["a test's own wall, spawn to reap (ms)", s["kiln_test_wall_ms"], s["bare_test_wall_ms"], None, None],
                ["a test's CPU (ms; kiln: its cgroup)", s["kiln_test_cpu_ms"], s["bare_test_cpu_ms"], None, None],
                ["CPU per test (ms; kiln: all of it; bare: the runs)", s["kiln_cpu_per_test_ms"], s["bare_cpu_per_test_ms"], s["added_cpu_per_test_ms"], r3(s["kiln_cpu_per_test_ms"] / s["bare_cpu_per_test_ms"])],
                ["CPU per test / cores (ms: the CPU-bound floor)", s["cpu_bound_per_test_ms"]["kiln"], s["cpu_bound_per_test_ms"]["bare"], r3(s["cpu_bound_per_test_ms"]["kiln"] - s["cpu_bound_per_test_ms"]["bare"]), None],
                ["the bare runner's own CPU per test (ms)", None, s["bare_worker_cpu_per_test_ms"], None, None],
                ["others' load meanwhile (cores)", s["others_cores_kiln"], s["others_cores_bare"], None, None],
            ],
        )
        b = s["kiln_cpu_breakdown_per_test_ms"]
        print(f"  kiln's CPU per test (cached): front {b['front']}, zygote {b['zygote']}, slots {b['slots']} (of which the tests' own {b['tests']}), templates {b['templates']} ms")
        for target, held in s["targets"].items():
            print(f"  target {target}: {'-' if held is None else 'holds' if held else 'MISSED'}")
    if "checker" in results:
        s = results["checker"]["summary"]
        w = s["wall_ms"]
        print(f"\n2. a cached checker: 1-test C++ requests, cached solutions, medians of {s['rounds']} rounds (ms; client / server)")
        table(
            ["request", "wall ms", "server ms", "IQR ms"],
            [[k, r3(v), s["server_wall_ms"][k], s["iqr_ms"][k]] for k, v in w.items()],
        )
        print(f"  cached checker's build (cached RE - no checker RE, paired): {s['cached_checker_build_ms']} ms (server {s['cached_checker_build_server_ms']}); fresh checker build {s['fresh_checker_build_ms']} ms; the checker's run per test {s['checker_run_ms']} ms")
        for target, held in s["targets"].items():
            print(f"  target {target}: {'holds' if held else 'MISSED'}")
    if "first_test" in results:
        rows = results["first_test"]["rows"]
        print(f"\n3. time to the first test, cached build, 1-test requests (ms; target < {TARGET_FIRST_TEST_MS} ms outside the test)")
        table(
            ["lang", "runs", "request", "server", "test wall", "test cpu", "outside test", "outside (server)", "worst", "verdict", "build (fresh)"],
            [[r["lang"], r.get("runs"), r.get("wall_ms"), r.get("server_wall_ms"), r.get("test_wall_ms"), r.get("test_cpu_ms"), r.get("outside_test_ms"), r.get("outside_test_server_ms"), r.get("outside_test_max_ms"), r["verdict"], r.get("build_ms")] for r in rows],
        )
        for r in rows:
            if "error" in r:
                print(f"  {r['lang']}: {r['error']}")
        p = results["first_test"]["probe"]
        print(
            f"  cpp, directly (a+b printing when its main() began; medians of {p['runs']}): main() begins {p['kiln_ms']} ms after the client sends the request "
            f"(worst {p['kiln_max_ms']}), the same binary spawned bare {p['bare_ms']} ms: kiln's share {p['added_ms']} ms; target < {TARGET_FIRST_TEST_MS} ms: {'holds' if p['verdict'] == 'ok' else 'MISSED'}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", type=int, default=1000, help="tests per request in section 1")
    parser.add_argument("--rounds", type=int, default=5, help="section 1's rounds (each: kiln fresh and cached, bare build and two batches)")
    parser.add_argument("--checker-rounds", type=int, default=11)
    parser.add_argument("--first-runs", type=int, default=11, help="cached 1-test requests per language in section 3")
    parser.add_argument("--langs", help="section 3's languages (default: every served language that judges)")
    parser.add_argument("--sections", default="1,2,3")
    parser.add_argument("--concurrency", type=int, default=16, help="RUN_CONCURRENCY")
    parser.add_argument("--parallel", type=int, default=8, help="RUN_JUDGE_PARALLEL (and the bare batches' parallelism)")
    parser.add_argument("--quick", action="store_true", help="a short run: 200 tests, 2 rounds, 5 checker rounds, 3 runs of python, js, cpp")
    parser.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE", help="extra kiln setting, for A/B runs; repeatable")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "judge.json")
    parser.add_argument("--bare-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare_worker:
        return bare_worker()
    if args.quick:
        args.tests, args.rounds, args.checker_rounds, args.first_runs = 200, 2, 5, 3
        args.langs = args.langs or "python,js,cpp"
    if os.geteuid() != 0:
        print("bench/judge.py needs root (kiln serve)", file=sys.stderr)
        return 2

    from kiln import config as config_module
    from kilntest import Server

    sections = set(args.sections.split(","))
    env = {
        "RUN_CONCURRENCY": str(args.concurrency),
        "RUN_JUDGE_PARALLEL": str(args.parallel),
        "RUN_JUDGE_TESTS_MAX": str(max(1000, args.tests)),
        "RUN_LOG_FORMAT": "json",
        **dict(item.split("=", 1) for item in args.server_env),
    }
    started_at = time.time()
    load_start = os.getloadavg()
    log(f"load average {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f}; starting kiln ({', '.join(f'{k}={v}' for k, v in env.items())})")
    nonce = secrets.token_hex(4)
    results: dict = {}
    server = Server(env).wait_ready(300)
    try:
        config = config_module.load(server.env, REPO)
        kiln = Kiln(server.port, timeout_s=600)
        cpu = Cpu(server)
        with tempfile.TemporaryDirectory(prefix="kiln-bench-judge-") as tmp:
            if "1" in sections:
                results["marginal"] = section_marginal(kiln, cpu, config, args, Path(tmp), nonce)
            if "2" in sections:
                results["checker"] = section_checker(kiln, args, nonce)
            if "3" in sections:
                results["first_test"] = section_first_test(kiln, args)
                results["first_test"]["probe"] = probe_first_test(kiln, config, args, Path(tmp))
    finally:
        server.stop()
    load_end = os.getloadavg()
    report(results)
    print(f"\nload average at start {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f}, at end {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}; {len(os.sched_getaffinity(0))} CPUs; {time.time() - started_at:.0f} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    out = {
        **run_facts(started_at, load_start, load_end),
        "server_env": env,
        "args": {k: v for k, v in vars(args).items() if k not in ("bare_worker", "out")},
        **results,
    }
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
