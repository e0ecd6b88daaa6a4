"""deploy/grafana/kiln.json, deploy/prometheus/kiln-rules.yml and the autoscalers' queries use
only metrics (and labels) that a live kiln's /metrics has; promtool accepts the rules and
passes their unit tests (deploy/prometheus/kiln-rules.test.yml).

A real server makes the metrics: runs, a burst that queues one request and refuses another
(429), and one connection too many (503), so that every family has samples and labels. The
PromQL is read by a small tokenizer: names followed by `(` are functions, names inside `{...}`
or a `by`/`without`/`on`/`ignoring`/`group_*` list are labels, the rest are metric names.

promtool comes from Debian's prometheus package (scripts/install-deploy-tools.sh, run by
`make test`, puts it in build/deploy-tools/)."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
from pathlib import Path

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from kiln import langs as kiln_langs
from kiln.judge.judge import VERDICTS
from kiln.wire.protocol import OUTCOMES
from kilntest import REPO, Server, burst, wait_until

DASHBOARD = REPO / "deploy" / "grafana" / "kiln.json"
RULES = REPO / "deploy" / "prometheus" / "kiln-rules.yml"
RULE_TESTS = REPO / "deploy" / "prometheus" / "kiln-rules.test.yml"
KUBE = REPO / "deploy" / "kubernetes"
PROMTOOL = REPO / "build" / "deploy-tools" / "promtool"

# labels Prometheus itself adds to what it scrapes (a target's address and job), and those
# Kubernetes service discovery (or a PodMonitor) adds
TARGET_LABELS = {"instance", "job", "namespace", "pod"}
# values a label may take that a short test run cannot all produce
KNOWN_VALUES = {"outcome": set(OUTCOMES) | {"output_too_large"}, "lang": set(kiln_langs.LANGUAGES), "verdict": set(VERDICTS) | {"CE"}}
# the sample names of each family type (a family declared with no sample yet shows only its type)
SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count", "_created"), "summary": ("", "_sum", "_count", "_created"), "gauge": ("",), "unknown": ("",)}

FUNCTIONS = set(
    """abs absent absent_over_time avg_over_time ceil changes clamp clamp_max clamp_min count_over_time
    day_of_month day_of_week day_of_year days_in_month delta deriv exp floor histogram_avg histogram_count
    histogram_fraction histogram_quantile histogram_stddev histogram_stdvar histogram_sum holt_winters
    hour idelta increase irate label_join label_replace last_over_time ln log10 log2 max_over_time
    min_over_time minute month predict_linear present_over_time quantile_over_time rate resets round
    scalar sgn sort sort_desc sort_by_label sort_by_label_desc sqrt stddev_over_time stdvar_over_time
    sum_over_time time timestamp vector year acos acosh asin asinh atan atanh cos cosh deg pi rad sin
    sinh tan tanh""".split()
)
AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk", "quantile", "limitk", "limit_ratio"}
LABEL_LISTS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan"}

TOKEN = re.compile(
    r"""(?P<space>\s+|\#[^\n]*)
    |(?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`)
    |(?P<range>\[[^\]]*\])
    |(?P<variable>\$\{?\w+(?::\w+)?\}?)
    |(?P<number>(?:0x[0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+)(?:ms|s|m|h|d|w|y)*)
    |(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)
    |(?P<op>=~|!~|!=|==|>=|<=|[-+*/%^<>=,(){}@])""",
    re.X,
)


def tokens(expr: str) -> list[tuple[str, str]]:
    found, at = [], 0
    while at < len(expr):
        match = TOKEN.match(expr, at)
        assert match, f"cannot read PromQL at {expr[at:at + 30]!r} in {expr!r}"
        if match.lastgroup != "space":
            found.append((match.lastgroup, match.group()))
        at = match.end()
    return found


def literal_alternatives(value: str, op: str) -> list[str] | None:
    """The values an `=` or a plain `a|b|c` regex matcher names (None: a real regex)."""
    if op == "=":
        return [value]
    if op == "=~" and re.fullmatch(r"[\w-]+(\|[\w-]+)*", value):
        return value.split("|")
    return None


def read_promql(expr: str) -> tuple[set[str], set[str], list[tuple[str | None, str, str, str]], set[str]]:
    """(metric names, functions, matchers (metric, label, op, value), grouping labels)."""
    metrics, functions, matchers, grouping = set(), set(), [], set()
    toks = tokens(expr)
    i = 0
    while i < len(toks):
        kind, text = toks[i]
        following = toks[i + 1] if i + 1 < len(toks) else (None, None)
        if kind == "name" and text in LABEL_LISTS:
            if following[1] == "(":
                i += 2
                while toks[i][1] != ")":
                    if toks[i][0] == "name":
                        grouping.add(toks[i][1])
                    i += 1
            i += 1
            continue
        if kind == "name" and text.lower() in KEYWORDS:
            i += 1
            continue
        if kind == "name" and (following[1] == "(" or text in AGGREGATIONS):
            functions.add(text)
            i += 1
            continue
        metric = None
        if kind == "name":
            metric = text
            metrics.add(text)
            i += 1
            kind, text = toks[i] if i < len(toks) else (None, None)
        if text == "{":
            i += 1
            while toks[i][1] != "}":
                if toks[i][0] == "name":
                    label, op, value = toks[i][1], toks[i + 1][1], toks[i + 2][1]
                    matchers.append((metric, label, op, json.loads(value) if value.startswith('"') else value.strip("'`")))
                    i += 3
                else:
                    i += 1  # a comma
            i += 1
            continue
        if metric is None:
            i += 1
    return metrics, functions, matchers, grouping


class Live:
    """What a live /metrics exposes: sample names, and each one's label names and values."""

    def __init__(self, text: str):
        self.labels: dict[str, dict[str, set[str]]] = {}
        self.empty: set[str] = set()  # sample names of families declared with no sample
        for family in text_string_to_metric_families(text):
            if not family.samples:
                self.empty |= {family.name + suffix for suffix in SUFFIXES.get(family.type, ("",))}
            for sample in family.samples:
                seen = self.labels.setdefault(sample.name, {})
                for label, value in sample.labels.items():
                    seen.setdefault(label, set()).add(value)

    def problems(self, expr: str) -> list[str]:
        """What in `expr` a live kiln does not have."""
        metrics, functions, matchers, grouping = read_promql(expr)
        found = []
        found += [f"unknown function {name}()" for name in functions - FUNCTIONS - AGGREGATIONS]
        found += [f"{name}: no sample in this /metrics (the fixture should make some)" for name in sorted(metrics & self.empty)]
        found += [f"no metric {name} in /metrics" for name in sorted(metrics - set(self.labels) - self.empty)]
        known_labels = set(TARGET_LABELS)
        for name in metrics & set(self.labels):
            known_labels |= set(self.labels[name])
        for metric, label, op, value in matchers:
            if label == "__name__":
                found += [f"no metric {name} in /metrics" for name in literal_alternatives(value, op) or [] if name not in self.labels]
                continue
            labels = self.labels.get(metric, {}) if metric else {}
            if metric in self.labels and label not in labels and label not in TARGET_LABELS:
                found.append(f"{metric} has no label {label}")
                continue
            values = labels.get(label, set()) | KNOWN_VALUES.get(label, set())
            for literal in literal_alternatives(value, op) or []:
                if label not in TARGET_LABELS and literal not in values and not literal.startswith("$"):
                    found.append(f'{metric}{{{label}="{literal}"}}: /metrics has no such value (has: {sorted(values)})')
        found += [f"grouping by {label}: no metric here has it" for label in sorted(grouping - known_labels - {"le"})]
        return found


@pytest.fixture(scope="module")
def live():
    """A kiln with one slot and a queue of one: a run, two judge requests (WA and built, AC from
    the build cache), a burst of three runs (one runs, one waits its turn, one is refused 429
    "queue full"), and one connection over RUN_CONNECTIONS_MAX."""
    server = Server({"RUN_LANGS": "python", "RUN_CONCURRENCY": "1", "RUN_QUEUE_MAX": "1", "RUN_QUEUE_WAIT": "10s", "RUN_CONNECTIONS_MAX": "8"}).wait_ready()
    try:
        assert server.run("python", "print(1)").status_code == 200
        for tests, verdict in (([{"stdin": "2", "expected": "4"}, {"stdin": "3", "expected": "7"}], "WA"), ([{"stdin": "2", "expected": "4"}], "AC")):
            judged = server.client.post("/judge", json={"lang_slug": "python", "solution_text": "print(int(input()) * 2)\n", "tests": tests})
            assert judged.status_code == 200 and judged.json()["verdict"] == verdict, judged.text
        statuses = sorted(answer.status_code for answer in burst(server, 3, lang_slug="python", solution_text="import time\ntime.sleep(0.8)\n"))
        assert statuses == [200, 200, 429], statuses
        assert wait_until(lambda: server.warm_slots(), 10)
        held = []
        try:
            for _ in range(12):  # the harness's own client holds one too
                held.append(socket.create_connection(("127.0.0.1", server.port)))
            held[-1].settimeout(5)
            assert held[-1].recv(64).startswith(b"HTTP/1.1 503")
        finally:
            for conn in held:
                conn.close()
        assert server.client.get("/health").status_code == 200
        text = httpx.get(f"{server.url}/metrics", timeout=10).text
    finally:
        server.stop()
    return Live(text)


def dashboard_queries() -> list[tuple[str, str]]:
    """(where, PromQL) for every panel target and every templating query."""
    board = json.loads(DASHBOARD.read_text())
    found = []

    def walk(panels):
        for panel in panels:
            for target in panel.get("targets", []):
                found.append((f"panel {panel['title']!r} {target['refId']}", target["expr"]))
            walk(panel.get("panels", []))

    walk(board["panels"])
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
            match = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", query)
            assert match, f"variable {variable['name']}: only label_values(selector, label) is read here: {query}"
            found.append((f"variable {variable['name']}", f"group by ({match[2]}) ({match[1]})"))
    return found


def rule_queries() -> list[tuple[str, str]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [(f"rule {rule.get('alert') or rule.get('record')}", rule["expr"]) for group in groups for rule in group["rules"]]


def autoscaler_queries() -> list[tuple[str, str]]:
    found = []
    for path in sorted(KUBE.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc["kind"] == "ScaledObject":
                found += [(f"{path.name} ScaledObject/{doc['metadata']['name']}", t["metadata"]["query"]) for t in doc["spec"]["triggers"]]
    return found


@pytest.mark.parametrize("source", [dashboard_queries, rule_queries, autoscaler_queries], ids=["dashboard", "alert-rules", "autoscalers"])
def test_queries_use_live_metrics(live, source):
    queries = source()
    assert queries
    problems = [f"{where}: {problem}" for where, expr in queries for problem in live.problems(expr)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "expr, problem",
    [
        ('sum(rate(kiln_run_total{lang="python"}[5m]))', "no metric kiln_run_total"),
        ("kiln_run_duration_seconds", "no metric kiln_run_duration_seconds in"),  # a histogram is _bucket/_sum/_count
        ('sum by (state) (kiln_slots{stat="busy"})', "kiln_slots has no label stat"),
        ('kiln_slots{state="bussy"}', 'kiln_slots{state="bussy"}'),
        ('kiln_runs_total{outcome=~"out_of_memory|oom"}', 'kiln_runs_total{outcome="oom"}'),
        ("sum by (language) (rate(kiln_runs_total[5m]))", "grouping by language"),
        ("histogram_quantil(0.9, kiln_queue_wait_seconds_bucket)", "unknown function histogram_quantil()"),
    ],
)
def test_the_expression_check_finds_mistakes(live, expr, problem):
    """The check above can fail: each mistake is reported."""
    assert any(problem in found for found in live.problems(expr)), live.problems(expr)


def test_dashboard_covers_the_topics(live):
    board = json.loads(DASHBOARD.read_text())
    panels = [p for p in board["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in board["panels"]}) == len(board["panels"])
    exprs = " ".join(expr for _, expr in dashboard_queries())
    for wanted in (
        "sum by (lang, outcome) (rate(kiln_runs_total",  # runs per second by language and outcome
        "histogram_quantile(0.99, sum by (le) (rate(kiln_run_duration_seconds_bucket",  # latency percentiles
        'kiln_slots{instance=~"$instance", state="busy"}',  # slots busy
        "sum by (state) (kiln_slots",  # warm, busy, warming
        "kiln_queue_length",
        "kiln_queue_wait_seconds_bucket",
        "out_of_memory|policy_violation",  # OOM and policy kills
        "kiln_prestarted_runs_total",  # prestart health
        'lang=~"python|js|ts|ruby|php"',  # template health, by the forked languages' run time
        "kiln_busy_refusals_total",
    ):
        assert wanted in exprs, wanted
    for panel in panels:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["title"] and panel["description"], panel
    # a row for judge verdicts exactly when /metrics has verdicts
    rows = [p["title"] for p in board["panels"] if p["type"] == "row"]
    has_verdicts = any("verdict" in labels for labels in live.labels.values())
    assert ("Judge verdicts" in rows) == has_verdicts, (rows, has_verdicts)
    if has_verdicts:
        assert "sum by (lang, verdict) (rate(kiln_judge_requests_total" in exprs


def promtool() -> Path:
    if not PROMTOOL.exists():
        found = shutil.which("promtool")
        assert found, f"no promtool at {PROMTOOL}: run scripts/install-deploy-tools.sh"
        return Path(found)
    return PROMTOOL


def test_promtool_checks_the_rules():
    done = subprocess.run([promtool(), "check", "rules", RULES], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rule_queries())} rules found" in done.stdout, done.stdout


def test_promtool_unit_tests_pass():
    """Each alert fires on the series that should fire it, with its labels and annotations, and
    stays quiet on the others."""
    done = subprocess.run([promtool(), "test", "rules", RULE_TESTS.name], cwd=RULE_TESTS.parent, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    tested = set(re.findall(r"alertname: (\w+)", RULE_TESTS.read_text()))
    alerts = {where.removeprefix("rule ") for where, _ in rule_queries()}
    assert alerts <= tested, f"alerts without a unit test: {alerts - tested}"


def test_rules_have_what_an_operator_reads():
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
            assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]
    alerts = {where.removeprefix("rule ") for where, _ in rule_queries()}
    assert {"KilnSlotsExhausted", "KilnQueueRefusals", "KilnServerErrors", "KilnPrestartFailing", "KilnNoWarmSlot"} <= alerts



def test_the_prestart_alert_names_every_prestarting_language():
    """KilnPrestartFailing lists the languages by name: those whose workspace has a `prestart`
    target, no more and no fewer (the list was left behind once when java, kotlin and csharp
    gained theirs)."""
    prestarting = {path.parent.name for path in (REPO / "langs").glob("*/Makefile") if re.search(r"^prestart:", path.read_text(), re.M)}
    rules = [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]
    [alert] = [rule for rule in rules if rule.get("alert") == "KilnPrestartFailing"]
    listed = re.search(r'lang=~"([^"]+)"', alert["expr"]).group(1).split("|")
    assert set(listed) == prestarting and len(listed) == len(prestarting)
