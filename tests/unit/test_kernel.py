"""kiln/kernel.py: the kernel features kiln uses, probed where a probe is exact, else by version."""

from __future__ import annotations

from kiln import kernel
from kiln.sandbox import cgroupfs


def test_a_release_gives_its_version():
    assert kernel.release_version("6.1.0-57-amd64") == (6, 1)
    assert kernel.release_version("6.18.44-fc-v1272") == (6, 18)
    assert kernel.release_version("garbage") == (0, 0)


def test_a_probe_decides_over_the_version_and_a_probe_that_cannot_tell_leaves_it_to_the_version():
    found = kernel.Feature("x", (9, 9), "does x", None, lambda: True)
    absent = kernel.Feature("y", (1, 0), "does y", "does z", lambda: False)
    unsure = kernel.Feature("w", (6, 5), "does w", "does v", lambda: None)
    assert kernel.present(found, (5, 0)) and not kernel.present(absent, (9, 9))
    assert kernel.present(unsure, (6, 5)) and not kernel.present(unsure, (6, 1))


def test_stock_debian_12s_kernel_lacks_only_optional_features_and_each_says_what_kiln_does_instead():
    surveyed = kernel.survey("6.1.0-57-amd64")
    assert kernel.missing_needed(surveyed) == []
    missing = {feature.name: kernel.describe_missing(feature) for feature, found in surveyed if not found}
    assert "an overlay on a detached mount clone" in missing  # 6.15: no probe here, the version says
    assert "Linux 6.15+" in missing["an overlay on a detached mount clone"] and "each slot binds" in missing["an overlay on a detached mount clone"]


def test_the_system_calls_kiln_needs_are_probed_on_this_kernel():
    # this host's kernel has every one: the probes must say so whatever the release claims
    surveyed = dict(kernel.survey("4.0.0"))
    syscalls = [feature for feature in surveyed if feature.name.startswith(("openat2", "pidfd_open", "close_range", "mount_setattr"))]
    assert len(syscalls) == 4 and all(surveyed[feature] for feature in syscalls)
    # and one with no probe is missing on an old release, named as needed
    [proc] = [feature for feature in surveyed if feature.name.startswith("procfs")]
    assert not surveyed[proc] and proc in kernel.missing_needed(list(surveyed.items()))
    assert "kiln cannot sandbox without it" in kernel.describe_missing(proc)


def test_a_v2_memory_peak_can_be_set_back_where_the_kernel_made_it_writable(tmp_path):
    # the kernel's own mode: 0644 where it has memory.peak's write handler (6.12), 0444 before
    peak = tmp_path / "memory.peak"
    assert not cgroupfs.memory_peak_resets(str(tmp_path))  # before 5.19: no file at all
    peak.write_text("0\n")
    peak.chmod(0o444)
    assert not cgroupfs.memory_peak_resets(str(tmp_path))
    peak.chmod(0o644)
    assert cgroupfs.memory_peak_resets(str(tmp_path))
    [feature] = [f for f in kernel.FEATURES if f.name.startswith("memory.peak set back")]
    assert feature.since == "Linux 6.12" and "cgroup of their own" in kernel.describe_missing(feature)
