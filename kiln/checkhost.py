"""`kiln check-host`: which languages this host can serve, with which toolchain, which of them
can judge (/judge: a workspace with `build` and `exec` targets), and why not.

Exits non-zero when a language RUN_LANGS asks for cannot be served (or, without RUN_LANGS,
when none can), or when kiln's native parts (the slots' init) are not built: a deploy script
can run it before starting the service.
"""

from __future__ import annotations

import json
import os
import sys

from kiln import kernel, langs, native, rootless, systemd
from kiln.config import Config
from kiln.runtime import StartupError, survey, toolchain_versions


def rows(config: Config) -> list[dict]:
    try:
        workloads, unserved = survey(config, tuple(langs.LANGUAGES))
    except StartupError as error:  # a single workspace whose Makefile is wrong
        return [{"slug": slug, "served": False, "version": None, "reason": str(error)} for slug in langs.LANGUAGES]
    versions = toolchain_versions([w.language for w in workloads.values()], config)
    reasons = {u.slug: u.reason for u in unserved}
    return [
        {
            "slug": slug,
            "served": slug in workloads,
            "version": versions.get(slug),
            "command": workloads[slug].script if slug in workloads else None,
            "prestart": slug in workloads and workloads[slug].prestart_argv is not None,
            "template": slug in workloads and workloads[slug].template_argv is not None,
            "judge": slug in workloads and workloads[slug].judges,
            "reason": reasons.get(slug),
            "wanted": config.langs is None or slug in config.langs,
        }
        for slug in langs.LANGUAGES
    ]


class _Quiet:
    def info(self, *_args, **_fields) -> None:
        pass

    warning = info


def kernel_lines(surveyed) -> list[str]:
    """The kernel's release and each feature kiln uses that it lacks (kiln/kernel.py)."""
    missing = [feature for feature, found in surveyed if not found]
    lines = [f"kernel: Linux {os.uname().release}, {len(surveyed) - len(missing)} of the {len(surveyed)} features kiln uses"]
    return lines + [f"  {'MISSING' if f.without is None else 'older'}: {kernel.describe_missing(f)}" for f in missing]


def sandbox_lines(config: Config, rootless_mode: bool) -> list[str]:
    """How this user's kiln would build its sandboxes: as root or rootless (with the maps it
    would have and what is weaker), and with which cgroups."""
    from kiln.sandbox import cgroup_detect, cgroups  # noqa: PLC0415

    lines = []
    if rootless_mode:
        planned = rootless.planned_namespace(os.getuid(), os.getgid())
        lines.append(f"sandbox: ROOTLESS as {planned.user} (uid map {', '.join(map(str, planned.uid_map))})")
        lines += [f"  weaker than under root: {sentence}" for sentence in planned.weaker()]
    else:
        lines.append("sandbox: as root")
    scope = cgroup_detect.read_scope_wanted(config.cgroup, config.instance)
    if scope and systemd.booted():
        lines.append(f"cgroups: v2 in a scope of its own, which `kiln serve` asks systemd for ({scope})")
        return lines
    try:
        driver = cgroup_detect.open_driver(config.cgroup, config.instance, _Quiet())
        lines.append(f"cgroups: {driver.name}" if not driver.reason else f"cgroups: NONE, runs would have no memory or pids limit: {driver.reason}")
    except cgroups.CgroupError as error:
        lines.append(f"cgroups: UNUSABLE ({error})")
    return lines


def main(config: Config, as_json: bool) -> int:
    try:
        native.check_built()
    except native.NotBuilt as error:
        print(f"kiln check-host: no slot can start: {error}", file=sys.stderr)
        return 1
    rootless_mode = os.geteuid() != 0  # as `kiln serve` decides
    table = rows(config)
    surveyed = kernel.survey()
    for line in [*kernel_lines(surveyed), *sandbox_lines(config, rootless_mode)]:
        print(line, file=sys.stderr if as_json else sys.stdout)
    if kernel.missing_needed(surveyed):
        print("kiln check-host: this kernel lacks what kiln needs to build its sandboxes", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps(table))
    else:
        print(f"{'LANG':<8} {'STATUS':<10} DETAIL")
        for row in table:
            status = "ok" if row["served"] else ("MISSING" if config.langs and row["wanted"] else "skipped")
            how = ", prestarted slots forked from a template" if row["template"] else ", prestarted slots" if row["prestart"] else ""
            judges = "judges" if row["judge"] else "cannot judge (no build and exec targets)"
            detail = f"{row['version']} ({judges}{how})" if row["served"] else row["reason"]
            print(f"{row['slug']:<8} {status:<10} {detail}")
    missing = [row["slug"] for row in table if row["wanted"] and not row["served"]]
    if config.langs and missing:
        print(f"kiln check-host: RUN_LANGS asks for languages this host cannot serve: {', '.join(missing)}", file=sys.stderr)
        return 1
    if not any(row["served"] for row in table):
        print("kiln check-host: no language can be served", file=sys.stderr)
        return 1
    return 0
