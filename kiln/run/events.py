"""What the pool tells whoever watches it (/metrics), given to SlotPool when it is made: the pool
calls these, never the other way round, and nothing sets them on the pool afterwards."""

from __future__ import annotations


class PoolEvents:
    """Each does nothing here; kiln.http.metrics.Metrics counts them."""

    def warmed(self, seconds: float) -> None:
        """A slot came warm, `seconds` after its spawn."""

    def traded(self) -> None:
        """A warm prestarted slot was closed unused: a request needed a plain slot or one prestarted for
        another language."""

    def converted(self, slug: str | None) -> None:
        """A warm slot was closed to warm its index for `slug` (None: back to plain)."""

    def prestart_failed(self, slug: str) -> None:
        """A slot prestarted for `slug`, or its command, failed."""

    def template_failed(self, slug: str) -> None:
        """`slug`'s template failed (its slots are spawned as usual meanwhile)."""

    def queued(self, seconds: float) -> None:
        """A request waited `seconds` in the queue for its turn."""
