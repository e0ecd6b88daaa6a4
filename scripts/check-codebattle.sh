#!/bin/sh
# The check an operator runs after pointing Codebattle at kiln (docs/codebattle.md): for each
# language, one POST /run shaped as Codebattle's backend sends it (lang_slug, solution_text,
# checker_text, asserts as JSON text, Codebattle's own timeout for that language; no
# Authorization header), an a+b solution, and for checker languages a checker. It checks what
# Codebattle needs to show "ok": status 200 within the timeout (Codebattle gives up then), exit
# code 0, and stdout that Codebattle's parser reads as the harness's items (one per call, each a
# "result" of a + b). Prints a table; exit status 0 when every language passed, 1 otherwise,
# 2 on a usage or connection error.
#
#   scripts/check-codebattle.sh URL [SLUG...]
#   BURST=40 scripts/check-codebattle.sh URL python    # also 40 at once, as a round's start
#
# URL is kiln's address (http://kiln.kiln:4040, or HAProxy's), or the address Codebattle itself
# uses with {slug} in it (http://runner-{slug}.kiln.svc), checked per language from a pod in the
# cluster. SLUGs default to every language the URL serves (GET /languages); with {slug}, to
# Codebattle's sixteen. Solutions come from tests/langs/examples/<slug>/ beside this script
# (python and js are written here); a language without them is skipped.
set -eu
exec python3 - "$(cd "$(dirname "$0")/.." && pwd)/tests/langs/examples" "$@" <<'PYTHON'
import json, os, re, sys, time, urllib.error, urllib.request
from concurrent.futures import ThreadPoolExecutor

# Codebattle's `container_run_timeout` per language (apps/runner/lib/runner/languages.ex): it
# sends it as `timeout` and waits exactly that long for the answer (executor/remote_zig.ex).
TIMEOUTS = {"clojure": 15, "cpp": 20, "csharp": 25, "dart": 20, "elixir": 20, "golang": 20, "java": 20, "js": 15,
            "kotlin": 25, "php": 15, "python": 15, "ruby": 15, "rust": 20, "swift": 20, "ts": 15, "zig": 20}
PAIRS = [[1, 2], [10, -3], [0, 0], [100, 23]]
BUILT_IN = {  # as Codebattle's templates write them (module.exports is its js wrapper's)
    "python": "from typing import List, Dict\n\ndef solution(a: int, b: int) -> int:\n    print('adding', a, b)\n    return a + b\n",
    "js": 'const _ = require("lodash");\nconst R = require("rambda");\n\nconst solution = (a, b) => {\n'
          "  console.log('adding', a, b);\n  return _.add(a, b);\n};\n\nmodule.exports = solution;\n",
}

examples, url, slugs = sys.argv[1], (sys.argv[2:3] or [""])[0], sys.argv[3:]
if not url.startswith(("http://", "https://")):
    print("usage: scripts/check-codebattle.sh URL [SLUG...]   (URL: http://host:4040, or http://runner-{slug}.NAMESPACE.svc)", file=sys.stderr)
    sys.exit(2)
burst = int(os.environ.get("BURST", "0"))


def base(slug):
    return url.replace("{slug}", slug).rstrip("/")


def call(method, address, body=None, timeout=30):
    """(status, parsed body or text, seconds); status None: no answer in time or no connection (why)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(address, data=data, method=method, headers={"content-type": "application/json"})
    start = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read()
    except OSError as error:  # Codebattle treats every transport error as a timeout
        return None, str(error), time.monotonic() - start
    try:
        return status, json.loads(raw), time.monotonic() - start
    except ValueError:
        return status, raw.decode(errors="replace"), time.monotonic() - start


class Unusable(Exception):
    pass


def served(address):
    status, body, _ = call("GET", address + "/languages")
    if status is None:
        raise Unusable(f"{address}: {body}")
    if status == 401:
        raise Unusable(f"{address}/languages: 401; Codebattle sends no API key: unset RUN_API_KEYS for it")
    if status != 200:
        raise Unusable(f"{address}/languages: {status} {body}")
    return {lang["slug"]: lang for lang in body["languages"]}, body["limits"]


def request(slug, lang):
    """Codebattle's body for the language, or None when there is no example of it."""
    folder = os.path.join(examples, slug)
    files = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    read = lambda name: open(os.path.join(folder, name), encoding="utf-8").read()
    solution = BUILT_IN.get(slug) or next((read(n) for n in files if n.lower().startswith("solution.")), None)
    checker = next((read(n) for n in files if n.lower().startswith("checker.")), None)
    if solution is None or (lang["checker"] and checker is None):
        return None
    own = "asserts.json" in files or not lang["checker"]  # else the example checker has its own pairs
    pairs = json.loads(read("asserts.json"))["arguments"] if "asserts.json" in files else PAIRS
    body = {"checker_text": checker if lang["checker"] else None, "lang_slug": slug,
            "timeout": f"{TIMEOUTS.get(slug, 20)}s", "solution_text": solution,
            "asserts": json.dumps({"arguments": pairs})}  # Codebattle sends JSON text
    return body, (pairs if own else None)


def items_of(stdout):
    """stdout read as Codebattle's output_parser_v2.ex reads it (exit code 0): the whole text as JSON
    (lines starting WARNING: removed), else each line that is JSON; one list stands for its items."""
    text = re.sub(r"WARNING:.+\n", "", stdout)
    try:
        got = json.loads(text)
    except ValueError:
        got = []
        for line in stdout.split("\n"):
            try:
                got.append(json.loads(line.strip()))
            except ValueError:
                pass
        if len(got) == 1 and isinstance(got[0], list) and got[0]:
            got = got[0]
    return got if isinstance(got, list) else [got]


def judge(status, body, seconds, timeout, pairs):
    """(what Codebattle would show, why)."""
    if status is None or seconds >= timeout:
        return "service_timeout", f"no answer within Codebattle's {timeout}s" + (f" ({body})" if status is None and body else "")
    if status != 200:
        return "service_failure", f"{status} {body.get('error') if isinstance(body, dict) else body}"[:60]
    if body["exit_code"] != 0:
        return "error", f"exit {body['exit_code']} ({body['stats']['outcome']}): {body['stderr'][-60:]!r}"
    items = [i for i in items_of(body["stdout"]) if not (isinstance(i, dict) and i.get("type") == "output")]
    if not items or not all(isinstance(i, dict) and {"type", "value"} <= set(i) for i in items):
        return "error", f"stdout is not the harness's items: {body['stdout'][:60]!r}"
    errors = [i["value"] for i in items if i["type"] != "result"]
    if errors:
        return "error", f"{len(errors)} call(s) failed: {str(errors[0])[:50]}"
    values = [i["value"] for i in items]
    if pairs is not None and values != [a + b for a, b in pairs]:
        return "failure", f"results {values}, expected {[a + b for a, b in pairs]}"
    if pairs is None and not all(isinstance(v, (int, float)) for v in values):
        return "failure", f"results {values} are not numbers"
    return "ok", f"{len(values)} results"


slugs = slugs or (list(TIMEOUTS) if "{slug}" in url else None)
rows, bursts, failed = [], [], False
try:
    langs, limits = ({}, {}) if "{slug}" in url else served(base(""))
except Unusable as error:
    print(error, file=sys.stderr)
    sys.exit(2)
for slug in slugs or list(langs):
    if "{slug}" in url:
        try:
            langs, limits = served(base(slug))
        except Unusable as error:
            rows.append((slug, "", "", "", "", "FAIL", str(error)[:70])); failed = True; continue
    lang = langs.get(slug)
    made = lang and request(slug, lang)
    if not made:
        why = "not served here" if not lang else "no example in tests/langs/examples"
        rows.append((slug, "", "", "", "", "FAIL" if not lang else "skip", why)); failed |= not lang; continue
    body, pairs = made
    timeout = TIMEOUTS.get(slug, 20)
    note = "" if slug in TIMEOUTS else " (not a Codebattle language)"
    if limits.get("timeout_max_ms", 0) < timeout * 1000:
        note += f"; RUN_TIMEOUT_MAX {limits.get('timeout_max_ms')} ms is below Codebattle's {timeout}s"
    post = lambda _=None: call("POST", base(slug) + "/run", body, timeout)
    status, answer, seconds = post()
    shows, why = judge(status, answer, seconds, timeout, pairs)
    failed |= shows != "ok"
    rows.append((slug, "yes" if lang["checker"] else "no", f"{timeout}s", str(status or "-"), f"{seconds * 1000:.0f} ms",
                 "PASS" if shows == "ok" else "FAIL", f"{shows}: {why}{note}"))
    if burst and shows == "ok":
        with ThreadPoolExecutor(burst) as pool:
            answers = list(pool.map(post, range(burst)))
        codes = [s for s, _, _ in answers]
        good = sum(judge(s, a, t, timeout, pairs)[0] == "ok" for s, a, t in answers)
        slowest = max(t for _, _, t in answers)
        other = burst - codes.count(200) - codes.count(429)
        bursts.append((slug, str(burst), str(good), str(codes.count(429)), str(other), f"{slowest * 1000:.0f} ms",
                       "PASS" if good == burst else "FAIL"))
        failed |= good != burst


def table(header, lines):
    widths = [max(len(r[i]) for r in [header] + lines) for i in range(len(header))]
    for r in [header] + lines:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


print(f"Codebattle-shaped checks against {url}")
table(("lang", "checker", "timeout", "status", "time", "check", "Codebattle would show"), rows)
if bursts:
    print()
    table(("lang", "at once", "ok", "429", "other", "slowest", "burst"), bursts)
sys.exit(1 if failed else 0)
PYTHON
