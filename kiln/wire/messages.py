"""The front <-> zygote channel's messages: the table first, then one dataclass per message, one
encoder and one decoder. Both sides speak only these (kiln/run/pool.py, kiln/zygote/zygote.py).

    direction        op                fields                                   descriptors
    zygote -> front  slot              index pid prestart warm_ms settles       the slot's socket
    zygote -> front  settled           index pid prestart ms                    -
    zygote -> front  warm_failed       index error prestart                     -
    zygote -> front  template_failed   slug                                     -
    zygote -> front  ready             -                                        -
    zygote -> front  ended             index pid                                -
    front -> zygote  demand            index slug                               -
    front -> zygote  kill              index pid                                -
    front -> zygote  shutdown          -                                        -

- slot: a slot is warm; `prestart` the language it was warmed for (None: plain); `settles`: a
  "settled" follows while it is unused (its prestarted command was started afresh, not forked).
- settled: that command stopped using CPU (its runtime is loaded) `ms` after the spawn, or was
  watched SETTLE_MAX_S without settling: the front sizes a language's share of slots by it.
- warm_failed: a slot did not warm (`prestart`: the language it was warmed for, or None).
- template_failed: a language's template failed; its slots are spawned as usual meanwhile.
- ready: every slot was warm once.
- ended: a slot the front asked to kill is gone.
- demand: slot `index` was given to a request for `slug` (None: one a prestarted slot cannot
  serve): its replacement is warmed for that language.
- kill: a slot whose run outstayed its timeout: its cgroup and init are killed from outside.
- shutdown (or end-of-file when the front is gone): the zygote stops.

A message of another shape is a ProtocolError: the decoder checks every field's type.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import ClassVar, Union, get_type_hints

from kiln.wire.protocol import ProtocolError


@dataclass(frozen=True)
class SlotWarm:
    OP: ClassVar[str] = "slot"
    index: int
    pid: int
    prestart: str | None
    warm_ms: float
    settles: bool


@dataclass(frozen=True)
class Settled:
    OP: ClassVar[str] = "settled"
    index: int
    pid: int
    prestart: str | None
    ms: float


@dataclass(frozen=True)
class WarmFailed:
    OP: ClassVar[str] = "warm_failed"
    index: int
    error: str
    prestart: str | None


@dataclass(frozen=True)
class TemplateFailed:
    OP: ClassVar[str] = "template_failed"
    slug: str


@dataclass(frozen=True)
class AllReady:
    OP: ClassVar[str] = "ready"


@dataclass(frozen=True)
class Ended:
    OP: ClassVar[str] = "ended"
    index: int
    pid: int


@dataclass(frozen=True)
class Demand:
    OP: ClassVar[str] = "demand"
    index: int
    slug: str | None


@dataclass(frozen=True)
class Kill:
    OP: ClassVar[str] = "kill"
    index: int
    pid: int


@dataclass(frozen=True)
class Shutdown:
    OP: ClassVar[str] = "shutdown"


TO_FRONT = (SlotWarm, Settled, WarmFailed, TemplateFailed, AllReady, Ended)
TO_ZYGOTE = (Demand, Kill, Shutdown)
ToFront = Union[SlotWarm, Settled, WarmFailed, TemplateFailed, AllReady, Ended]  # noqa: UP007 - a runtime alias
ToZygote = Union[Demand, Kill, Shutdown]  # noqa: UP007

# each field's accepted types, from the annotations (a float field takes an int: JSON's 2.0 is 2)
_TYPES = {
    cls.OP: {name: tuple(t for t in getattr(hint, "__args__", (hint,))) + ((int,) if hint is float else ()) for name, hint in get_type_hints(cls).items() if name != "OP"}
    for cls in (*TO_FRONT, *TO_ZYGOTE)
}
_BY_OP = {cls.OP: cls for cls in (*TO_FRONT, *TO_ZYGOTE)}


def encode(message: ToFront | ToZygote) -> dict:
    return {"op": message.OP, **asdict(message)}


def decode(header: dict, allowed: tuple[type, ...]) -> ToFront | ToZygote:
    """The message `header` is, if it is one of `allowed`'s with every field of its type."""
    cls = _BY_OP.get(header.get("op"))
    if cls not in allowed:
        raise ProtocolError(f"not a message here: {header.get('op')!r}")
    types = _TYPES[cls.OP]
    wrong = [name for name, accepted in types.items() if name not in header or type(header[name]) not in accepted]
    if wrong or set(header) - {"op", *types}:
        raise ProtocolError(f"a {cls.OP} message with a bad {', '.join(wrong) or 'key'}: {header!r}")
    return cls(**{field.name: header.get(field.name) for field in fields(cls)})
