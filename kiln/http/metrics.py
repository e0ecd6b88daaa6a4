"""Prometheus metrics of the front (its own registry: nothing of the process leaks in)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Metrics:
    def __init__(self, pool):
        self.registry = registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter("kiln_http_requests", "HTTP requests answered", ["route", "status", "lang"], registry=registry)
        self.runs = Counter("kiln_runs", "Runs that reached a slot, by outcome", ["lang", "outcome"], registry=registry)
        self.run_seconds = Histogram(
            "kiln_run_duration_seconds",
            "Wall time of runs, from the front's view (slot taken to result)",
            ["lang"],
            buckets=(0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
            registry=registry,
        )
        self.busy_refusals = Counter("kiln_busy_refusals", "Requests refused with 429 (all slots in use)", registry=registry)
        Gauge("kiln_slots_warm", "Warm slots ready for a run", registry=registry).set_function(lambda: pool.warm_count)
        Gauge("kiln_runs_in_flight", "Runs in flight", registry=registry).set_function(lambda: pool.in_flight)

    def render(self) -> bytes:
        return generate_latest(self.registry)
