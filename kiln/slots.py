"""`kiln slots`: what each slot of a running kiln is doing, from the outside (psutil), and the
memory the whole service holds (USS: front, zygote, templates, slots).

Slots name themselves (`kiln: slot 3 busy python 1.2s`); the zygote's pidfile, under
/run/<RUN_INSTANCE>/, says where to look, and its environment gives RUN_UID_BASE.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import psutil

from kiln import config as config_module
from kiln.runtime import zygote_pidfile

# "kiln: slot 3 warm", "kiln: slot 3 warm python" (prestarted), "kiln: slot 3 busy python 2.0s"
TITLE = re.compile(r"kiln: slot (\d+) (warming|warm|busy)(?: (\S+))?(?: (\d+\.\d)s)?")
REPO_ROOT = Path(__file__).resolve().parent.parent
TITLE_EVERY_S = 1.0  # kiln-init refreshes a busy slot's title with its run's age this often (supervise.c)


class NotRunning(Exception):
    pass


def find_zygote(instance: str) -> psutil.Process:
    try:
        pid = int(Path(zygote_pidfile(instance)).read_text())
        zygote = psutil.Process(pid)
        if "kiln: zygote" in " ".join(zygote.cmdline()):
            return zygote
    except (OSError, ValueError, psutil.Error):
        pass
    why = "names no live zygote" if Path(zygote_pidfile(instance)).exists() else "is missing"
    raise NotRunning(f"no running kiln with RUN_INSTANCE={instance} ({zygote_pidfile(instance)} {why})")


def _uid_base(zygote: psutil.Process) -> int:
    try:
        environ = zygote.environ()
    except psutil.Error:
        environ = {}
    try:
        return config_module.load({k: v for k, v in environ.items() if k == "RUN_UID_BASE"}, REPO_ROOT).uid_base
    except config_module.ConfigError:
        return config_module.UID_BASE_MIN


def snapshot(zygote: psutil.Process) -> list[dict]:
    uid_base = _uid_base(zygote)
    rows = []
    for init in zygote.children():
        try:
            match = TITLE.match(" ".join(init.cmdline()))
            if not match:
                continue  # a slot's init between its spawn and its first title
            tree = [init, *init.children(recursive=True)]
            cpu = rss = 0.0
            for proc in tree:
                try:
                    times = proc.cpu_times()
                    cpu += times.user + times.system
                    rss += proc.memory_info().rss
                except psutil.Error:
                    pass
            uss = _uss(tree)
            task = tree[1] if len(tree) > 1 else None
            index = int(match.group(1))
            rows.append(
                {
                    "index": index,
                    "state": match.group(2),
                    "pid": init.pid,
                    "uid": uid_base + index,
                    "language": match.group(3),
                    "age_s": _age_s(match, task),
                    "cpu_s": round(cpu, 2),
                    "rss_bytes": int(rss),
                    "uss_bytes": uss,
                }
            )
        except psutil.Error:
            continue  # the slot ended while we looked
    return sorted(rows, key=lambda row: row["index"])


def _uss(processes) -> int:
    """Memory only these processes hold (USS: their private pages), what ending them frees."""
    total = 0
    for proc in processes:
        try:
            total += proc.memory_full_info().uss
        except psutil.Error:
            pass
    return total


def service_memory(zygote: psutil.Process, rows: list[dict]) -> dict[str, int]:
    """The whole service's USS by part: the front (the zygote's parent), the zygote, the
    language templates (the zygote's children that are not slots), the slots (from `rows`)."""
    slots = {row["pid"] for row in rows}
    try:
        templates = [p for p in zygote.children() if p.pid not in slots and "--template" in " ".join(p.cmdline())]
        front = [zygote.parent()] if zygote.parent() else []
    except psutil.Error:
        templates, front = [], []
    parts = {"front": _uss(front), "zygote": _uss([zygote]), "templates": _uss(templates), "slots": sum(row["uss_bytes"] for row in rows)}
    return {"total": sum(parts.values()), **parts}


def _age_s(match: re.Match, task: psutil.Process | None) -> float | None:
    """A busy slot's run: from its title, or, within its first second, from its task's start
    (a prestarted task started while the slot warmed: at most that second)."""
    if match.group(2) != "busy":
        return None
    if match.group(4):
        return float(match.group(4))
    try:
        return round(min(time.time() - task.create_time(), TITLE_EVERY_S), 1) if task else 0.0
    except psutil.Error:
        return 0.0


def render(rows: list[dict]) -> str:
    header = f"{'SLOT':>4} {'STATE':<8} {'PID':>7} {'UID':>7} {'LANG':<8} {'AGE':>7} {'CPU s':>7} {'RSS MiB':>8} {'USS MiB':>8}"
    lines = [header]
    for row in rows:
        age = f"{row['age_s']:.1f}s" if row["age_s"] is not None else "-"
        lines.append(
            f"{row['index']:>4} {row['state']:<8} {row['pid']:>7} {row['uid']:>7} {row['language'] or '-':<8} "
            f"{age:>7} {row['cpu_s']:>7.2f} {row['rss_bytes'] / 2**20:>8.1f} {row['uss_bytes'] / 2**20:>8.1f}"
        )
    return "\n".join(lines)


def render_service(memory: dict[str, int]) -> str:
    parts = ", ".join(f"{name} {memory[name] / 2**20:.1f}" for name in ("front", "zygote", "templates", "slots"))
    return f"service USS {memory['total'] / 2**20:.1f} MiB ({parts})"


def main(instance: str, watch: bool, as_json: bool, interval_s: float = 1.0) -> int:
    try:
        zygote = find_zygote(instance)
    except NotRunning as error:
        print(f"kiln slots: {error}", file=sys.stderr)
        return 1
    while True:
        try:
            rows = snapshot(zygote)
            text = json.dumps(rows) if as_json else render(rows) + "\n" + render_service(service_memory(zygote, rows))
        except psutil.NoSuchProcess:  # it exited between two looks (a stop while watching)
            print("kiln slots: the zygote exited", file=sys.stderr)
            return 1
        try:
            if watch and sys.stdout.isatty():
                sys.stdout.write("\x1b[H\x1b[2J")  # like top: redraw in place
            print(text, flush=True)
        except BrokenPipeError:  # its reader is gone (`kiln slots --watch | head`): done
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
            return 0
        if not watch:
            return 0
        if not zygote.is_running():
            print("kiln slots: the zygote exited", file=sys.stderr)
            return 1
        time.sleep(interval_s)
