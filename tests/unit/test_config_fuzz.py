"""Property tests for the config parser (issue 7, "Fuzzing"): whatever the environment holds,
`config.load` returns a Config or raises ConfigError naming every bad variable; good values
round-trip; a secret is never echoed."""

from __future__ import annotations

import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kiln import config, langs
from kiln.config import Config, ConfigError
from kiln.units import MiB, format_duration_ms, format_size

SETTINGS = {s.variable: s for s in config._SETTINGS}
PER_SLUG = [prefix + slug.upper() for prefix in config._PER_SLUG for slug in langs.LANGUAGES]


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("repo")
    (root / "langs").mkdir()
    return root


# Near-misses of every syntax the settings take, and anything at all.
near_miss = st.one_of(
    st.text(alphabet=string.digits + "kKmMgGsS .,-+_/:", max_size=12),
    st.sampled_from(["", " ", "0", "1", "true", "no", "auto", "v1", "json", "python,js", "/usr/lib", "kiln", "65536", "4294967296", "1s", "0ms"]),
    st.integers(-(2**40), 2**70).map(str),
    st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=20),
)
variables = st.sampled_from(sorted(SETTINGS)) | st.sampled_from(PER_SLUG) | st.sampled_from(["RUN_TMP_SIZE_python", "RUN_TMP_SIZE_", "RUN_CONCURENCY", "RUN_X", "LANG", "TZ", "WATCHDOG_USEC", "LISTEN_FDS", "LISTEN_PID"])
environments = st.dictionaries(variables, near_miss, max_size=8)


@settings(max_examples=500, deadline=None)
@given(environ=environments)
def test_any_environment_gives_a_config_or_a_config_error(repo, environ):
    try:
        loaded = config.load(environ, repo)
    except ConfigError as error:
        assert error.problems and all(isinstance(p, str) and p for p in error.problems)
        named = {p.split("=", 1)[0] for p in error.problems}
        assert named <= set(environ) | {"RUN_WORKSPACE"}, named  # only what was set (or the default workspace)
        if "RUN_API_KEYS" in named and environ["RUN_API_KEYS"].strip():
            assert all(not p.startswith("RUN_API_KEYS") or "<hidden>" in p for p in error.problems)
        return
    assert isinstance(loaded, Config)
    assert config.load(environ, repo) == loaded  # a pure function of the environment
    for variable, text in environ.items():
        if variable.startswith("RUN_") and variable not in SETTINGS and variable not in PER_SLUG:
            assert any(w.startswith(f"{variable} is not a kiln setting") for w in loaded.warnings), (variable, loaded.warnings)


WHOLE_NUMBERS = {"PORT": ("port", 1, 65535), "RUN_CONCURRENCY": ("concurrency", 1, 256), "RUN_PIDS_MAX": ("pids_max", 8, 65536), "RUN_TMP_INODES": ("tmp_inodes", 64, 10_000_000), "RUN_UID_BASE": ("uid_base", config.UID_BASE_MIN, config.UID_BASE_MAX)}


@settings(max_examples=300, deadline=None)
@given(variable=st.sampled_from(sorted(WHOLE_NUMBERS)), number=st.integers(0, 10**12 - 1) | st.integers(0, 70000))
def test_whole_numbers_are_taken_exactly_within_their_bounds(repo, variable, number):
    field, low, high = WHOLE_NUMBERS[variable]
    if low <= number <= high:
        assert getattr(config.load({variable: str(number)}, repo), field) == number
    else:
        with pytest.raises(ConfigError, match=f"^{variable}="):
            config.load({variable: str(number)}, repo)


SIZES = {"RUN_INPUT_MAX": ("input_max", 1), "RUN_MEMORY_MAX": ("memory_max", 0), "RUN_SANDBOX_TMP_SIZE": ("sandbox_tmp_size", MiB), "RUN_CGROUP_MEMORY_MAX": ("cgroup_memory_max", 16 * MiB)}


@settings(max_examples=300, deadline=None)
@given(variable=st.sampled_from(sorted(SIZES)), size=st.integers(0, 2**40))
def test_sizes_round_trip(repo, variable, size):
    field, low = SIZES[variable]
    if size >= low:
        assert getattr(config.load({variable: format_size(size)}, repo), field) == size
    else:
        with pytest.raises(ConfigError, match=f"^{variable}="):
            config.load({variable: format_size(size)}, repo)


@settings(max_examples=200, deadline=None)
@given(size=st.integers(0, 128 * MiB))
def test_output_max_round_trips_with_its_ceiling(repo, size):
    if size <= config.OUTPUT_CEILING:
        assert config.load({"RUN_OUTPUT_MAX": format_size(size)}, repo).output_max == (size or config.OUTPUT_CEILING)
    else:
        with pytest.raises(ConfigError, match="^RUN_OUTPUT_MAX="):
            config.load({"RUN_OUTPUT_MAX": format_size(size)}, repo)


@settings(max_examples=200, deadline=None)
@given(variable=st.sampled_from(["RUN_TIMEOUT_MAX", "RUN_SHUTDOWN_GRACE"]), ms=st.integers(0, 10**12 - 1))
def test_durations_round_trip(repo, variable, ms):
    field = SETTINGS[variable].field
    if ms == 0 and variable == "RUN_TIMEOUT_MAX":
        with pytest.raises(ConfigError, match="^RUN_TIMEOUT_MAX="):
            config.load({variable: format_duration_ms(ms)}, repo)
    else:
        assert getattr(config.load({variable: format_duration_ms(ms)}, repo), field) == ms


@settings(max_examples=200, deadline=None)
@given(bad=st.dictionaries(st.sampled_from(sorted(WHOLE_NUMBERS)), st.sampled_from(["", "x", "-1", "1.5", "0x10", " 7"]), min_size=1))
def test_every_bad_variable_is_reported_at_once(repo, bad):
    with pytest.raises(ConfigError) as raised:
        config.load(bad, repo)
    assert sorted(p.split("=", 1)[0] for p in raised.value.problems) == sorted(bad)


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.text(alphabet=string.ascii_letters + string.digits + " \t", min_size=1, max_size=12), min_size=1, max_size=4))
def test_api_keys_are_never_echoed(repo, keys):
    text = ",".join(keys)
    try:
        loaded = config.load({"RUN_API_KEYS": text}, repo)
    except ConfigError as error:
        assert str(error).startswith("RUN_API_KEYS=<hidden>: ") and repr(text) not in str(error)
        return
    assert loaded.api_keys == tuple(dict.fromkeys(k.strip() for k in keys if k.strip()))
    assert all(" " not in key and "\t" not in key for key in loaded.api_keys)
