"""Warm when asked (issue 19, part 4): one client sending one language's a+b one after another,
as a player pressing "check" does. Is each run served by a slot prestarted (or forked) for its
language, and how far is the median from the best?

For every prestarting language a server serves (GET /languages, `prestart: true`) and every
think time (--think, seconds between an answer and the next request), a fresh kiln (RUN_CONCURRENCY
--slots, 10 by default: every slot plain and warm, as after a start) gets one warm-up run of the
language's example a+b (bench/langs.py's `example`), then --runs runs one after another on one
keep-alive connection. Per run: the client's wall time and whether the front's access log says
`prestarted`; per sequence: the fraction served prestarted (also as /metrics'
kiln_prestarted_runs_total moved), the median and best wall, and the slots' kinds at the end
(as `ps` shows them).

Target: at least 90 % served prestarted, the median within 1.2 x the best, for every language.

    .venv/bin/python bench/warm.py [--langs clojure,elixir] [--runs 20] [--think 0,1] [--slots 10]
    .venv/bin/python bench/warm.py --server-env RUN_PRESTART=false   # an A/B of kiln's settings
    .venv/bin/python bench/warm.py --before /tmp/warm-before   # A/B: "before" servers get PYTHONPATH=that

With --before, every sequence is run twice, by a server with PYTHONPATH set to that folder (a
sitecustomize.py there can load older kiln modules) and by one without, the order flipping each
time, so that a shared machine's drift hits both sides alike.

Root is needed (kiln serve). Writes bench/results/warm.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))
from client import KilnClient, run_facts  # noqa: E402 - bench/ is this script's folder
from langs import example  # noqa: E402

TARGET_PRESTARTED = 0.9
TARGET_MEDIAN_OVER_BEST = 1.2


def prestarted_runs(client: KilnClient, slug: str) -> float:
    text = client.get("/metrics").decode()
    found = re.search(rf'^kiln_prestarted_runs_total\{{lang="{slug}"\}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


def payload_of(slug: str) -> bytes:
    from kiln import langs

    solution, checker, asserts = example(langs.LANGUAGES[slug])
    body = {"lang_slug": slug, "solution_text": solution, "timeout": "60s"}
    if checker is not None:
        body["checker_text"] = checker
    if asserts is not None:
        body["asserts"] = asserts
    return json.dumps(body).encode()


def post(client: KilnClient, payload: bytes) -> tuple[float, str]:
    """(wall seconds, the request id) of one run, which must exit 0."""
    request_id = uuid.uuid4().hex
    started = time.perf_counter()
    client.conn.request("POST", "/run", payload, {"Content-Type": "application/json", "X-Request-Id": request_id})
    response = client.conn.getresponse()
    body = response.read()
    wall = time.perf_counter() - started
    if response.status != 200:
        raise RuntimeError(f"/run answered {response.status}: {body[:500]!r}")
    answer = json.loads(body)
    if answer["exit_code"] != 0:
        raise RuntimeError(f"the run exited {answer['exit_code']}: {answer['stderr'][-500:]!r}")
    return wall, request_id


def sequence(slug: str, think: float, runs: int, env: dict, log, side: str = "") -> dict:
    from kilntest import Server

    server = Server(env).wait_ready(180)
    try:
        client = KilnClient(server.port)
        client.settle(int(env["RUN_CONCURRENCY"]), timeout_s=120)
        payload = payload_of(slug)
        warmup_wall, _ = post(client, payload)
        time.sleep(think)
        before = prestarted_runs(client, slug)
        walls, ids = [], []
        for _ in range(runs):
            wall, request_id = post(client, payload)
            walls.append(wall * 1000)
            ids.append(request_id)
            time.sleep(think)
        served = prestarted_runs(client, slug) - before
        deadline = time.monotonic() + 5
        records: dict[str, dict] = {}
        while len(records) < len(ids) and time.monotonic() < deadline:
            records = {r["request_id"]: r for r in server.logged("request") if r.get("request_id") in ids}
            time.sleep(0.01)
        flags = [bool(records.get(i, {}).get("prestarted")) for i in ids]
        kinds = {}
        for slot in server.slots():
            key = f"{slot.state}:{slot.lang or 'plain'}"
            kinds[key] = kinds.get(key, 0) + 1
    finally:
        server.stop()
    median, best = statistics.median(walls), min(walls)
    row = {
        "side": side,
        "lang": slug,
        "think_s": think,
        "runs": runs,
        "warmup_ms": round(warmup_wall * 1000, 1),
        "prestarted": sum(flags),
        "prestarted_fraction": round(sum(flags) / runs, 3),
        "prestarted_metric": served,
        "median_ms": round(median, 1),
        "best_ms": round(best, 1),
        "median_over_best": round(median / best, 2),
        "walls_ms": [round(w, 1) for w in walls],
        "served_prestarted": flags,
        "slots_at_end": kinds,
    }
    row["verdict"] = "ok" if row["prestarted_fraction"] >= TARGET_PRESTARTED and row["median_over_best"] <= TARGET_MEDIAN_OVER_BEST else "MISSED"
    log(f"  {side + ' ' if side else ''}{slug} think {think:g} s: {sum(flags)}/{runs} prestarted, median {median:.1f} ms, best {best:.1f} ms "
        f"({median / best:.2f}x) {row['verdict']}; walls {' '.join('%.0f%s' % (w, '' if f else '*') for w, f in zip(walls, flags))} (* not prestarted)")
    return row


def served_prestarting(env: dict) -> list[str]:
    from kilntest import Server

    server = Server(env).wait_ready(180)
    try:
        languages = json.loads(KilnClient(server.port).get("/languages"))["languages"]
    finally:
        server.stop()
    return sorted(entry["slug"] for entry in languages if entry["prestart"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--langs", help="comma-separated prestarting slugs (default: every one the server serves)")
    parser.add_argument("--runs", type=int, default=20, help="runs after the warm-up, per sequence")
    parser.add_argument("--think", default="0,1", help="comma-separated think times, seconds")
    parser.add_argument("--slots", type=int, default=10, help="RUN_CONCURRENCY")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "warm.json")
    parser.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE", help="extra kiln setting; repeatable")
    parser.add_argument("--before", help="A/B: also run every sequence with PYTHONPATH set to this folder (the 'before' side)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench/warm.py needs root (kiln serve)", file=sys.stderr)
        return 2

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    env = {"RUN_CONCURRENCY": str(args.slots), "RUN_LOG_FORMAT": "json"}
    env.update(item.split("=", 1) for item in args.server_env)
    started_at = time.time()
    load_start = os.getloadavg()
    slugs = args.langs.split(",") if args.langs else served_prestarting(env)
    env["RUN_LANGS"] = ",".join(slugs)
    log(f"load average {load_start[0]:.2f}; {args.slots} slots; {args.runs} runs after one warm-up; languages {', '.join(slugs)}")
    rows = []
    for n, (slug, think) in enumerate((slug, float(think)) for slug in slugs for think in args.think.split(",")):
        if not args.before:
            rows.append(sequence(slug, think, args.runs, env, log))
            continue
        sides = [("before", {**env, "PYTHONPATH": args.before}), ("after", env)]
        for side, side_env in sides if n % 2 == 0 else sides[::-1]:
            rows.append(sequence(slug, think, args.runs, side_env, log, side))
    rows.sort(key=lambda r: (r["lang"], r["think_s"], r["side"] != "before"))
    load_end = os.getloadavg()
    print("| language | think s | side | served prestarted | median ms | best ms | median / best | warm-up ms | slots at the end |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(r["slots_at_end"].items()))
        print(f"| {r['lang']} | {r['think_s']:g} | {r['side'] or '-'} | {r['prestarted']}/{r['runs']} ({r['prestarted_fraction']:.0%}) | {r['median_ms']} | {r['best_ms']} | {r['median_over_best']} | {r['warmup_ms']} | {kinds} |")
    print(f"target: >= {TARGET_PRESTARTED:.0%} prestarted and median <= {TARGET_MEDIAN_OVER_BEST} x best; "
          f"load average at start {load_start[0]:.2f}, at end {load_end[0]:.2f}; {time.time() - started_at:.0f} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {**run_facts(started_at, load_start, load_end), "server_env": env, "before": args.before, "target": {"prestarted_fraction": TARGET_PRESTARTED, "median_over_best": TARGET_MEDIAN_OVER_BEST}, "results": rows}
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    log(f"wrote {args.out}")
    return 0 if all(r["verdict"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
