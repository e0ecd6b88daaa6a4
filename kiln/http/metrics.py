"""Prometheus metrics of the front (its own registry: nothing of the process leaks in)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily

from kiln.judge.answer import JudgeAnswer
from kiln.run.events import PoolEvents

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
RUN_BUCKETS = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
WARM_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)


class Metrics(PoolEvents):
    """The front's counters, and the pool's events counted (made before the pool, which is given
    them; `watch` then reads the pool's state for the gauges)."""

    def __init__(self, concurrency: int, workloads: dict | None = None):
        self.concurrency = concurrency
        self.registry = registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter("kiln_http_requests", "HTTP requests answered, by route, status and language", ["route", "status", "lang"], registry=registry)
        self.runs = Counter("kiln_runs", "Runs that reached a slot, by language and outcome (output_too_large: killed for output over RUN_OUTPUT_MAX, a 413)", ["lang", "outcome"], registry=registry)
        self.run_seconds = Histogram("kiln_run_duration_seconds", "Wall time of a run's test command, by language", ["lang"], buckets=RUN_BUCKETS, registry=registry)
        self.busy_refusals = Counter(
            "kiln_busy_refusals",
            "Requests refused with 429, by reason: every slot was running and the queue was full (queue full; no queue with RUN_QUEUE_WAIT=0 or RUN_QUEUE_MAX=0), the request waited RUN_QUEUE_WAIT (queue wait), or another client took its place in a full queue (queue share: its client held the most)",
            ["reason"],
            registry=registry,
        )
        self.queue_wait_seconds = Histogram("kiln_queue_wait_seconds", "Time requests waited in the queue for their turn (every slot running)", buckets=WARM_BUCKETS + (5, 10, 30), registry=registry)
        self.overload_refusals = Counter(
            "kiln_overload_refusals", "Connections answered 503 and closed, by reason: out of file descriptors, or RUN_CONNECTIONS_MAX open", ["reason"], registry=registry
        )
        self.judge_requests = Counter("kiln_judge_requests", "Judge requests answered 200, by language and overall verdict (CE, AC, WA, TLE, ...)", ["lang", "verdict"], registry=registry)
        self.judge_tests = Counter("kiln_judge_tests", "Judge tests, by language and verdict (SK: not run)", ["lang", "verdict"], registry=registry)
        self.judge_builds = Counter("kiln_judge_builds", "Judge builds, by language and whether the build cache had them (hit: true)", ["lang", "hit"], registry=registry)
        self.prestart_failures = Counter("kiln_prestart_failures", "Prestarted slots that failed to warm, or whose prestart command died before its request, by language", ["lang"], registry=registry)
        self.template_failures = Counter("kiln_template_failures", "Language templates that failed (exited, or answered wrongly) and are started again after a pause, by language", ["lang"], registry=registry)
        self.prestarted_runs = Counter("kiln_prestarted_runs", "Runs served by a slot prestarted for their language, by language (of kiln_runs)", ["lang"], registry=registry)
        self.prestart_trades = Counter("kiln_prestart_trades", "Warm prestarted slots closed unused: a request needed a plain slot or one prestarted for another language, and none was warm", registry=registry)
        self.slot_conversions = Counter(
            "kiln_slot_conversions",
            "Warm slots closed unused to warm their index again, prestarted for another language or plain: for a prestarting language just asked for (to: the language), or back to plain once it was not asked for a while (to: plain)",
            ["to"],
            registry=registry,
        )
        self.slot_warmup_seconds = Histogram("kiln_slot_warmup_seconds", "Time to warm a slot: spawn, namespaces, root filesystem", buckets=WARM_BUCKETS, registry=registry)
        self.prestarting = prestarting = sorted(slug for slug, workload in (workloads or {}).items() if workload.prestart_argv is not None)
        # 0 from the start: an alert sees every language; kiln_prestarted_runs / kiln_runs gives
        # the prestarting languages' share
        for slug in prestarting:
            self.prestart_failures.labels(slug)
            self.prestarted_runs.labels(slug)
        for slug, workload in (workloads or {}).items():
            if workload.template_argv is not None:
                self.template_failures.labels(slug)

    def watch(self, pool) -> None:
        """The gauges of the pool's state, read when /metrics is asked."""
        registry, concurrency = self.registry, self.concurrency
        Gauge("kiln_queue_length", "Requests waiting for their turn", registry=registry).set_function(lambda: len(pool.queue))
        judges_queued = Gauge("kiln_judge_queue_length", "Judge requests waiting for admission (RUN_JUDGE_MAX judged at once)", registry=registry)
        judges_queued.set_function(lambda: len(pool.judges.queue))
        Gauge("kiln_judge_requests_admitted", "Judge requests admitted, being judged", registry=registry).set_function(lambda: pool.judges.held)
        Gauge("kiln_runs_in_flight", "Runs in flight", registry=registry).set_function(lambda: pool.in_flight)
        slots = Gauge("kiln_slots", "Slots by state (warming counts slots being replaced)", ["state"], registry=registry)
        slots.labels("warm").set_function(lambda: pool.warm_count)
        slots.labels("busy").set_function(lambda: pool.in_flight)
        slots.labels("warming").set_function(lambda: max(0, concurrency - pool.warm_count - pool.in_flight))
        registry.register(_PrestartedSlots(pool, self.prestarting))

    # -- the pool's events (kiln.run.events.PoolEvents) -----------------------------------------
    def warmed(self, seconds: float) -> None:
        self.slot_warmup_seconds.observe(seconds)

    def traded(self) -> None:
        self.prestart_trades.inc()

    def converted(self, slug: str | None) -> None:
        self.slot_conversions.labels(slug or "plain").inc()

    def prestart_failed(self, slug: str) -> None:
        self.prestart_failures.labels(slug).inc()

    def template_failed(self, slug: str) -> None:
        self.template_failures.labels(slug).inc()

    def queued(self, seconds: float) -> None:
        self.queue_wait_seconds.observe(seconds)

    def judged(self, slug: str, answer: JudgeAnswer) -> None:
        self.judge_requests.labels(slug, answer.verdict).inc()
        self.judge_builds.labels(slug, str(answer.compile.cached).lower()).inc()
        for test in answer.tests:
            self.judge_tests.labels(slug, test.verdict).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _PrestartedSlots:
    """kiln_prestarted_slots: the warm slots prestarted for each language, by whether their
    command is still loading (a request takes a settled one first: loading ones are what a burst
    of a slow-starting language finds)."""

    def __init__(self, pool, languages: list[str]):
        self.pool = pool
        self.languages = languages

    def collect(self):
        family = GaugeMetricFamily("kiln_prestarted_slots", "Warm slots prestarted for a language, by language and whether its command is still loading", labels=["lang", "loading"])
        warm = [(slot.prestart, slot.loading) for slot in self.pool.warm if slot.prestart is not None]
        for slug in self.languages:
            for loading in (False, True):
                family.add_metric([slug, str(loading).lower()], warm.count((slug, loading)))
        yield family
