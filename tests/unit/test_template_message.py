"""The zygote's request to a language template (kiln/zygote/template.py -> template.c): its
layout, and descriptors named by their place among those passed, not by the zygote's numbers."""

from __future__ import annotations

import struct

from kiln.sandbox import libc
from kiln.zygote.template import fork_message


def parts(message: bytes) -> tuple[int, list[bytes], list[bytes]]:
    (flags,) = struct.unpack("=Q", message[:8])
    assert message.endswith(b"\0")
    strings = message[8:-1].split(b"\0")
    cut = strings.index(b"")
    return flags, strings[:cut], strings[cut + 1 :]


def test_flags_argv_and_environment_in_order():
    flags, argv, env = parts(fork_message(libc.CLONE_NEWPID | libc.CLONE_NEWIPC, ["kiln: slot 3 warming   "], {"KILN_PRESTART": "python"}, []))
    assert flags == libc.CLONE_NEWPID | libc.CLONE_NEWIPC
    assert argv == [b"kiln: slot 3 warming   "]
    assert env == [b"KILN_PRESTART=python"]


def test_descriptors_become_their_place_among_those_passed():
    keep = [17, 9, 30, 31, 40, 41]
    env = {"KILN_SOCK": "17", "KILN_RECIPE": "30", "KILN_ZYGOTE": "9", "KILN_CG_DIRS": "40,41", "KILN_CG_PROCS": "", "KILN_PRESTART": "30"}
    _, _, entries = parts(fork_message(0, ["init"], env, keep))
    assert entries == [b"KILN_SOCK=#0", b"KILN_RECIPE=#2", b"KILN_ZYGOTE=#1", b"KILN_CG_DIRS=#4,#5", b"KILN_CG_PROCS=", b"KILN_PRESTART=30"]
