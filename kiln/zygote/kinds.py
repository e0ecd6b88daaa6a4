"""The kinds of slot the zygote warms, one class each (as gunicorn's worker classes): how a slot
of the kind is spawned, and what its warm-up's success or failure means beyond the slot.

    Plain()                  kiln-init spawned into the slot's new namespaces: any language
    Prestarted(workload)     ... and the language's prestart command started, waiting for its go
    Forked(workload, t)      cloned by the language's template t, its task forked from the warm
                             runtime (needs the index's kept namespaces)

An index's next kind follows what the front last asked of it (`Index.next_prestart`, a language or
None: plain); `kind_for` turns that into a kind with what the zygote has at hand.
"""

from __future__ import annotations

import socket
from typing import Protocol

from kiln.runtime import Runtime, Workload
from kiln.sandbox.cgroups import SlotCgroup
from kiln.zygote import slot
from kiln.zygote.slot import Index, Slot
from kiln.zygote.template import Template, Templates


class Zygote(Protocol):
    """What a kind needs of the zygote (kiln/zygote/zygote.py)."""

    runtime: Runtime
    pidfd: int
    indexes: dict[int, Index]
    templates: Templates

    def recipe_of(self, index: Index, cgroup: SlotCgroup) -> int: ...


class Plain:
    prestart: str | None = None  # the language a slot of the kind is warmed for
    forked = False

    def spawn(self, z: Zygote, index: Index, cgroup: SlotCgroup) -> tuple[int, socket.socket]:
        """Start warming a slot of this kind: init's pid and the zygote's end of its socket."""
        return slot.spawn(index.spec, cgroup, index.root_image, z.pidfd, z.recipe_of(index, cgroup))

    def on_ready(self, z: Zygote, s: Slot) -> None:
        """The slot reported ready."""

    def on_failed(self, z: Zygote, s: Slot, error: str) -> str:
        """The slot failed while warming; returns the error as it is reported."""
        return error


class Prestarted(Plain):
    def __init__(self, workload: Workload):
        self.workload = workload
        self.prestart = workload.slug

    def spawn(self, z: Zygote, index: Index, cgroup: SlotCgroup) -> tuple[int, socket.socket]:
        return slot.spawn(index.spec, cgroup, index.root_image, z.pidfd, z.recipe_of(index, cgroup), self.workload)

    def on_failed(self, z: Zygote, s: Slot, error: str) -> str:
        z.indexes[s.index].next_prestart = None  # retried as a plain slot: one broken prestart stops no run
        return f"prestarting {self.prestart}: {error}"


class Forked(Prestarted):
    forked = True

    def __init__(self, workload: Workload, template: Template):
        super().__init__(workload)
        self.template = template

    def spawn(self, z: Zygote, index: Index, cgroup: SlotCgroup) -> tuple[int, socket.socket]:
        """Raises TemplateError when the template cannot (kind_for's caller then spawns)."""
        return slot.spawn(index.spec, cgroup, index.root_image, z.pidfd, z.recipe_of(index, cgroup), self.workload, via=self.template)

    def on_ready(self, z: Zygote, s: Slot) -> None:
        z.templates.worked(self.prestart)

    def on_failed(self, z: Zygote, s: Slot, error: str) -> str:
        error = super().on_failed(z, s, error)
        z.templates.failed(self.template, error)  # started again after a pause
        return error


def kind_for(z: Zygote, index: Index) -> Plain:
    """The kind of the index's next slot: forked when its language's template is ready and the
    index has its root image, else prestarted, or plain when no language is asked for."""
    if index.next_prestart is None:
        return Plain()
    workload = z.runtime.workloads[index.next_prestart]
    template = z.templates.ready(index.next_prestart)
    if template is not None and index.root_image is not None:
        return Forked(workload, template)
    return Prestarted(workload)
