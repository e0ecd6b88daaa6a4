"""kiln.config: every variable, its default, its good and bad values, and how problems are reported."""

import dataclasses
import os
import json
import pathlib

import pytest

from kiln import config, langs
from kiln.config import OUTPUT_CEILING, Config, ConfigError, Systemd
from kiln.units import GiB, KiB, MiB


@pytest.fixture
def repo(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / "langs").mkdir()
    return tmp_path


def load(repo: pathlib.Path, **environ: str) -> Config:
    return config.load(environ, repo)


def error_of(repo: pathlib.Path, **environ: str) -> ConfigError:
    with pytest.raises(ConfigError) as raised:
        config.load(environ, repo)
    return raised.value


# --- defaults ---


def test_config_has_exactly_the_documented_fields():
    assert [field.name for field in dataclasses.fields(Config)] == [
        "port", "host", "allow_shutdown", "concurrency", "input_max", "output_max", "debug",
        "uid_base", "env_allow", "sandbox_env", "memory_max", "sandbox_tmp_size", "tmp_size_by_slug",
        "workspace", "timeout_max_ms", "cgroup", "cgroup_memory_max", "cgroup_memory_max_by_slug",
        "pids_max", "tmp_inodes", "readonly_paths", "front_user", "langs", "prestart", "templates", "api_keys",
        "sandbox_path", "shutdown_grace_ms", "read_timeout_ms", "idle_timeout_ms", "connections_max",
        "queue_wait_ms", "queue_max", "judge_input_max", "judge_bodies_max", "judge_tests_max", "judge_time_max_ms",
        "judge_parallel", "judge_max", "build_cache_max", "file_max", "file_store", "file_store_max", "instance", "log_format", "warnings", "systemd", "given",
    ]  # fmt: skip


def test_defaults_with_an_empty_environment(repo):
    cfg = load(repo)
    assert cfg == Config(
        port=4040,
        host="0.0.0.0",
        allow_shutdown=False,
        concurrency=10,
        input_max=MiB,
        output_max=MiB,
        debug=False,
        uid_base=10001,
        env_allow=(),
        sandbox_env=(),
        memory_max=0,
        sandbox_tmp_size=None,
        tmp_size_by_slug=(),
        workspace=(repo / "langs").resolve(),
        timeout_max_ms=300_000,
        cgroup="auto",
        cgroup_memory_max=GiB,
        cgroup_memory_max_by_slug=(),
        pids_max=256,
        tmp_inodes=16384,
        readonly_paths=("/usr", "/etc/alternatives", "/etc/ld.so.cache"),
        front_user="kiln",
        langs=None,
        prestart=None,
        templates=None,
        api_keys=(),
        sandbox_path="/usr/local/bin:/usr/bin:/bin",
        shutdown_grace_ms=30_000,
        read_timeout_ms=10_000,
        idle_timeout_ms=60_000,
        connections_max=1000,
        queue_wait_ms=5_000,
        queue_max=40,
        judge_input_max=16 * MiB,
        judge_bodies_max=min(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 8, 2 * GiB),
        judge_tests_max=1000,
        judge_time_max_ms=10_000,
        judge_parallel=5,
        judge_max=2,
        build_cache_max=512 * MiB,
        file_max=64 * MiB,
        file_store=pathlib.Path("/var/lib/kiln/files"),
        file_store_max=4 * GiB,
        instance="kiln",
        log_format="logfmt",
        warnings=(),
        systemd=Systemd(),
    )
    assert cfg.default_timeout_ms == 30_000


def test_judge_bodies_take_an_eighth_of_the_memory_at_most_64_of_the_largest_unless_told(repo):
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert load(repo, RUN_JUDGE_INPUT_MAX="1m").judge_bodies_max == min(memory // 8, 128 * MiB)
    assert load(repo, RUN_JUDGE_BODIES_MAX="40m").judge_bodies_max == 40 * MiB


def test_the_queue_holds_four_runs_a_slot_unless_told(repo):
    assert load(repo, RUN_CONCURRENCY="3").queue_max == 12
    assert load(repo, RUN_CONCURRENCY="3", RUN_QUEUE_MAX="5").queue_max == 5


def test_the_judge_takes_half_the_slots_and_the_store_follows_the_instance(repo):
    assert load(repo, RUN_CONCURRENCY="1").judge_parallel == 1
    assert load(repo, RUN_CONCURRENCY="7").judge_parallel == 3
    assert load(repo, RUN_CONCURRENCY="7").judge_max == 2  # their tests ask for at most 6 turns at once
    assert load(repo, RUN_CONCURRENCY="1").judge_max == 1
    assert load(repo, RUN_CONCURRENCY="8", RUN_JUDGE_PARALLEL="1").judge_max == 8
    assert load(repo, RUN_JUDGE_MAX="3").judge_max == 3
    assert load(repo, RUN_INSTANCE="blue").file_store == pathlib.Path("/var/lib/blue/files")
    assert load(repo, RUN_FILE_STORE="/srv/kiln//files/").file_store == pathlib.Path("/srv/kiln/files")
    for bad in ("files", "/srv/../etc", ""):
        with pytest.raises(ConfigError, match="RUN_FILE_STORE"):
            load(repo, RUN_FILE_STORE=bad)


def test_load_reads_only_the_mapping_it_is_given(repo, monkeypatch):
    monkeypatch.setenv("RUN_CONCURRENCY", "7")
    monkeypatch.setenv("PORT", "not a port")
    assert load(repo).concurrency == 10


def test_config_is_frozen(repo):
    cfg = load(repo)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.port = 1  # type: ignore[misc]
    hash(cfg)  # every field is immutable, so the whole config is hashable


# --- good values of every variable ---

GOOD = [
    ("PORT", "1", "port", 1),
    ("PORT", "65535", "port", 65535),
    ("PORT", "080", "port", 80),
    ("HOST", "127.0.0.1", "host", "127.0.0.1"),
    ("HOST", "::", "host", "::"),
    ("ALLOW_SHUTDOWN", "1", "allow_shutdown", True),
    ("ALLOW_SHUTDOWN", "true", "allow_shutdown", True),
    ("ALLOW_SHUTDOWN", "Yes", "allow_shutdown", True),
    ("ALLOW_SHUTDOWN", "0", "allow_shutdown", False),
    ("ALLOW_SHUTDOWN", "FALSE", "allow_shutdown", False),
    ("ALLOW_SHUTDOWN", "no", "allow_shutdown", False),
    ("RUN_CONCURRENCY", "1", "concurrency", 1),
    ("RUN_CONCURRENCY", "256", "concurrency", 256),
    ("RUN_INPUT_MAX", "1", "input_max", 1),
    ("RUN_INPUT_MAX", "2m", "input_max", 2 * MiB),
    ("RUN_INPUT_MAX", "512K", "input_max", 512 * KiB),
    ("RUN_OUTPUT_MAX", "1k", "output_max", KiB),
    ("RUN_OUTPUT_MAX", "64m", "output_max", 64 * MiB),
    ("RUN_OUTPUT_MAX", "0", "output_max", OUTPUT_CEILING),
    ("DEBUG", "", "debug", True),
    ("DEBUG", "1", "debug", True),
    ("DEBUG", "TRUE", "debug", True),
    ("DEBUG", "yes", "debug", True),
    ("DEBUG", "0", "debug", False),
    ("DEBUG", "no", "debug", False),
    ("RUN_UID_BASE", "1000", "uid_base", 1000),
    ("RUN_UID_BASE", "2147483390", "uid_base", 2**31 - 1 - 256 - 1),
    ("RUN_ENV_ALLOW", "FOO", "env_allow", ("FOO",)),
    ("RUN_ENV_ALLOW", " FOO , ,BAR_1,_x,", "env_allow", ("FOO", "BAR_1", "_x")),
    ("RUN_ENV_ALLOW", "FOO,FOO", "env_allow", ("FOO",)),
    ("RUN_ENV_ALLOW", "", "env_allow", ()),
    ("RUN_MEMORY_MAX", "0", "memory_max", 0),
    ("RUN_MEMORY_MAX", "512m", "memory_max", 512 * MiB),
    ("RUN_SANDBOX_TMP_SIZE", "1m", "sandbox_tmp_size", MiB),
    ("RUN_SANDBOX_TMP_SIZE", "1048576", "sandbox_tmp_size", MiB),
    ("RUN_SANDBOX_TMP_SIZE", "2g", "sandbox_tmp_size", 2 * GiB),
    ("RUN_TIMEOUT_MAX", "1ms", "timeout_max_ms", 1),
    ("RUN_TIMEOUT_MAX", "10m", "timeout_max_ms", 600_000),
    ("RUN_CGROUP", "auto", "cgroup", "auto"),
    ("RUN_CGROUP", "v2", "cgroup", "v2"),
    ("RUN_CGROUP", "v1", "cgroup", "v1"),
    ("RUN_CGROUP", "off", "cgroup", "off"),
    ("RUN_CGROUP_MEMORY_MAX", "16m", "cgroup_memory_max", 16 * MiB),
    ("RUN_CGROUP_MEMORY_MAX", "2G", "cgroup_memory_max", 2 * GiB),
    ("RUN_PIDS_MAX", "8", "pids_max", 8),
    ("RUN_PIDS_MAX", "65536", "pids_max", 65536),
    ("RUN_TMP_INODES", "64", "tmp_inodes", 64),
    ("RUN_TMP_INODES", "10000000", "tmp_inodes", 10_000_000),
    ("RUN_FRONT_USER", "kiln", "front_user", "kiln"),
    ("RUN_LANGS", "python", "langs", ("python",)),
    ("RUN_LANGS", " python, js ,python,", "langs", ("python", "js")),
    ("RUN_LANGS", "", "langs", None),
    ("RUN_LANGS", "  ", "langs", None),
    ("RUN_LANGS", " , ", "langs", None),
    ("RUN_API_KEYS", "k1", "api_keys", ("k1",)),
    ("RUN_API_KEYS", " k1 ,,k2!~#, k1", "api_keys", ("k1", "k2!~#")),
    ("RUN_API_KEYS", "", "api_keys", ()),
    ("RUN_SANDBOX_PATH", "/bin", "sandbox_path", "/bin"),
    ("RUN_SANDBOX_PATH", "/opt/x/bin:/usr/bin", "sandbox_path", "/opt/x/bin:/usr/bin"),
    ("RUN_SHUTDOWN_GRACE", "0s", "shutdown_grace_ms", 0),
    ("RUN_SHUTDOWN_GRACE", "90s", "shutdown_grace_ms", 90_000),
    ("RUN_SHUTDOWN_GRACE", "2m", "shutdown_grace_ms", 120_000),
    ("RUN_READ_TIMEOUT", "100ms", "read_timeout_ms", 100),
    ("RUN_READ_TIMEOUT", "1m", "read_timeout_ms", 60_000),
    ("RUN_IDLE_TIMEOUT", "5s", "idle_timeout_ms", 5_000),
    ("RUN_CONNECTIONS_MAX", "1", "connections_max", 1),
    ("RUN_CONNECTIONS_MAX", "50000", "connections_max", 50_000),
    ("RUN_QUEUE_WAIT", "0s", "queue_wait_ms", 0),
    ("RUN_QUEUE_WAIT", "0", "queue_wait_ms", 0),  # DESIGN: "RUN_QUEUE_WAIT=0: at once"
    ("RUN_SHUTDOWN_GRACE", "0", "shutdown_grace_ms", 0),
    ("RUN_QUEUE_WAIT", "2m", "queue_wait_ms", 120_000),
    ("RUN_QUEUE_MAX", "0", "queue_max", 0),
    ("RUN_QUEUE_MAX", "7", "queue_max", 7),
    ("RUN_JUDGE_MAX", "1", "judge_max", 1),
    ("RUN_JUDGE_MAX", "64", "judge_max", 64),
    ("RUN_INSTANCE", "k", "instance", "k"),
    ("RUN_INSTANCE", "kiln-2_b", "instance", "kiln-2_b"),
    ("RUN_INSTANCE", "a" * 32, "instance", "a" * 32),
    ("RUN_LOG_FORMAT", "logfmt", "log_format", "logfmt"),
    ("RUN_LOG_FORMAT", "json", "log_format", "json"),
]


@pytest.mark.parametrize("variable, value, field, expected", GOOD)
def test_good_value(repo, variable, value, field, expected):
    cfg = load(repo, **{variable: value})
    assert getattr(cfg, field) == expected
    assert cfg.warnings == ()


# --- bad values of every variable ---

BAD = [
    ("PORT", ["0", "65536", "-1", "+80", " 80", "80 ", "8_0", "٨٠", "1e3", "http", "0" * 13 + "1"]),
    ("HOST", ["", " ", "\t"]),
    ("ALLOW_SHUTDOWN", ["", "2", "on", "off", "y", " true"]),
    ("RUN_CONCURRENCY", ["0", "257", "", "-1", "ten", "10.0"]),
    ("RUN_INPUT_MAX", ["0", "", "-1", "1.5m", "1t", "1 m", "1mb"]),
    ("RUN_OUTPUT_MAX", ["65m", "67108865", "1g", "", "-1", "1.5m"]),
    ("DEBUG", ["2", "on", " ", "maybe"]),
    ("RUN_UID_BASE", ["999", "0", "2147483391", "2147483647", "", "-10001"]),
    ("RUN_MEMORY_MAX", ["", "-1", "1.5g", "lots"]),
    ("RUN_SANDBOX_TMP_SIZE", ["1048575", "1023k", "0", "", "64 m"]),
    ("RUN_TIMEOUT_MAX", ["0", "0s", "0ms", "0m", "", "10", "1h", "1.5s"]),
    ("RUN_CGROUP", ["", "V2", "cgroup2", "none", "auto "]),
    ("RUN_CGROUP_MEMORY_MAX", ["16777215", "15m", "0", ""]),
    ("RUN_PIDS_MAX", ["7", "65537", "0", ""]),
    ("RUN_TMP_INODES", ["63", "10000001", ""]),
    ("RUN_FRONT_USER", ["", "  "]),
    ("RUN_SANDBOX_PATH", ["", "bin", "/a::/b", "/a:", ":/a", "/usr/bin:bin"]),
    ("RUN_SHUTDOWN_GRACE", ["", "30", "1h", "-1s"]),
    ("RUN_READ_TIMEOUT", ["", "0s", "99ms", "10"]),
    ("RUN_IDLE_TIMEOUT", ["", "0s", "1.5s"]),
    ("RUN_CONNECTIONS_MAX", ["", "0", "1000001", "-1", "1e3"]),
    ("RUN_QUEUE_WAIT", ["", "5", "-1s", "00", "0.0"]),
    ("RUN_QUEUE_MAX", ["", "65537", "-1"]),
    ("RUN_JUDGE_MAX", ["", "0", "65537", "-1", "two"]),
    ("RUN_INSTANCE", ["", "Kiln", "1kiln", "-kiln", "kiln/x", "kiln.x", "kiln\n", "a" * 33]),
    ("RUN_LOG_FORMAT", ["", "JSON", "text"]),
    ("RUN_ENV_ALLOW", ["1A", "A-B", "A B", "FOO,PATH", "HOME", "RUN_API_KEYS", "RUN_TMP_SIZE_PYTHON"]),
    ("RUN_LANGS", ["cobol", "Python", "python,cobol"]),
    ("RUN_READONLY_PATHS", ["opt", "./opt", "/opt/../etc", "/opt/..", "/", "/.", "//", "/opt,usr"]),
    ("RUN_WORKSPACE", ["", "/nonexistent/kiln/langs"]),
]


@pytest.mark.parametrize(
    "variable, value", [(variable, value) for variable, values in BAD for value in values]
)
def test_bad_value_names_the_variable_and_the_value(repo, variable, value):
    error = error_of(repo, **{variable: value})
    assert error.problems == (str(error),)
    assert str(error).startswith(f"{variable}={value!r}: ")


@pytest.mark.parametrize(
    "variable, value, accepted",
    [
        ("RUN_CONCURRENCY", "0", "RUN_CONCURRENCY='0': must be a whole number from 1 to 256"),
        ("PORT", "0", "must be a whole number from 1 to 65535"),
        ("RUN_UID_BASE", "999", "RUN_UID_BASE + 256 must stay below 2**31 - 1"),
        ("RUN_OUTPUT_MAX", "65m", "from 0 to 64m"),
        ("RUN_SANDBOX_TMP_SIZE", "1k", "at least 1m"),
        ("RUN_CGROUP_MEMORY_MAX", "1m", "at least 16m"),
        ("RUN_TIMEOUT_MAX", "0s", "at least 1ms"),
        ("RUN_CGROUP", "v3", "must be one of auto, v2, v1, off"),
        ("RUN_LOG_FORMAT", "text", "must be logfmt or json"),
        ("ALLOW_SHUTDOWN", "on", "must be 1, true, yes, 0, false or no"),
        ("RUN_ENV_ALLOW", "PATH", "PATH is set by kiln"),
        ("RUN_ENV_ALLOW", "RUN_API_KEYS", "RUN_API_KEYS is a kiln setting"),
        ("RUN_LANGS", "cobol", "'cobol' is not a language; use any of clojure, cpp,"),
        ("RUN_READONLY_PATHS", "/", "is the root itself"),
        ("RUN_READONLY_PATHS", "/a/../b", "without '..'"),
        ("RUN_WORKSPACE", "/nonexistent", "must be an existing directory"),
    ],
)
def test_bad_value_says_what_is_accepted(repo, variable, value, accepted):
    assert accepted in str(error_of(repo, **{variable: value}))


def test_every_langs_slug_is_listed_when_one_is_wrong(repo):
    message = str(error_of(repo, RUN_LANGS="cobol"))
    assert all(slug in message for slug in langs.LANGUAGES)


# Every variable except DEBUG and the four list-like ones.
NOT_LIST_LIKE = [
    "PORT", "HOST", "ALLOW_SHUTDOWN", "RUN_CONCURRENCY", "RUN_INPUT_MAX", "RUN_OUTPUT_MAX",
    "RUN_UID_BASE", "RUN_MEMORY_MAX", "RUN_SANDBOX_TMP_SIZE", "RUN_WORKSPACE", "RUN_TIMEOUT_MAX",
    "RUN_CGROUP", "RUN_CGROUP_MEMORY_MAX", "RUN_PIDS_MAX", "RUN_TMP_INODES", "RUN_FRONT_USER",
    "RUN_SANDBOX_PATH", "RUN_SHUTDOWN_GRACE", "RUN_INSTANCE", "RUN_LOG_FORMAT",
    "RUN_READ_TIMEOUT", "RUN_IDLE_TIMEOUT", "RUN_CONNECTIONS_MAX", "RUN_QUEUE_WAIT", "RUN_QUEUE_MAX",
    "RUN_JUDGE_INPUT_MAX", "RUN_JUDGE_TESTS_MAX", "RUN_JUDGE_TIME_MAX", "RUN_JUDGE_PARALLEL",
    "RUN_JUDGE_MAX", "RUN_BUILD_CACHE_MAX", "RUN_FILE_MAX", "RUN_FILE_STORE", "RUN_FILE_STORE_MAX",
    "RUN_TMP_SIZE_PYTHON", "RUN_CGROUP_MEMORY_MAX_JS", "RUN_PRESTART",
]  # fmt: skip


@pytest.mark.parametrize("variable", NOT_LIST_LIKE)
def test_an_empty_value_is_an_error_and_the_message_says_to_unset_it(repo, variable):
    message = str(error_of(repo, **{variable: ""}))
    assert message.startswith(f"{variable}='': ")
    assert message.endswith("; or unset it to use the default")


@pytest.mark.parametrize("variable", ["RUN_ENV_ALLOW", "RUN_LANGS", "RUN_API_KEYS", "RUN_READONLY_PATHS"])
def test_an_empty_list_means_the_default(repo, variable):
    assert load(repo, **{variable: ""}) == load(repo)


def test_an_unset_debug_is_off_and_an_empty_one_is_on(repo):
    assert load(repo).debug is False
    assert load(repo, DEBUG="").debug is True


def test_api_keys_never_appear_in_an_error(repo):
    message = str(error_of(repo, RUN_API_KEYS="s3cret-key,with space"))
    assert "s3cret" not in message and "with space" not in message
    assert message == "RUN_API_KEYS=<hidden>: key #2 has a space or a character outside printable ASCII"


@pytest.mark.parametrize("key", ["caf\u00e9", "tab\there", "del\x7f", "nul\x00"])
def test_api_keys_must_be_printable_ascii(repo, key):
    assert "key #1" in str(error_of(repo, RUN_API_KEYS=key))


# --- several problems at once ---


def test_all_problems_are_reported_together_one_per_line(repo):
    error = error_of(
        repo,
        RUN_CONCURRENCY="0",
        PORT="http",
        RUN_CGROUP="v3",
        RUN_TMP_SIZE_COBOL="1g",
        RUN_WORKSPACE="/nonexistent",
        RUN_CONCURENCY="5",  # a warning, not a problem
    )
    lines = str(error).splitlines()
    assert lines == list(error.problems)
    assert len(lines) == 5
    for expected in ("RUN_CONCURRENCY='0'", "PORT='http'", "RUN_CGROUP='v3'", "RUN_TMP_SIZE_COBOL='1g'",
                     "RUN_WORKSPACE='/nonexistent'"):  # fmt: skip
        assert sum(line.startswith(expected) for line in lines) == 1


# --- RUN_OUTPUT_MAX ---


def test_output_max_zero_lifts_the_cap_to_the_ceiling(repo):
    assert OUTPUT_CEILING == 64 * MiB
    assert load(repo, RUN_OUTPUT_MAX="0").output_max == 64 * MiB
    assert load(repo, RUN_OUTPUT_MAX="0k").output_max == 64 * MiB


# --- RUN_TIMEOUT_MAX and the default timeout ---


@pytest.mark.parametrize("timeout_max, default", [("10s", 10_000), ("30s", 30_000), ("31s", 30_000), ("5m", 30_000)])
def test_default_timeout_is_30s_or_the_maximum(repo, timeout_max, default):
    assert load(repo, RUN_TIMEOUT_MAX=timeout_max).default_timeout_ms == default


# --- RUN_WORKSPACE ---


def test_workspace_is_stored_absolute_and_resolved(repo, tmp_path, monkeypatch):
    (tmp_path / "ws").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "ws")
    assert load(repo, RUN_WORKSPACE=str(tmp_path / "link")).workspace == (tmp_path / "ws").resolve()
    monkeypatch.chdir(tmp_path)
    assert load(repo, RUN_WORKSPACE="ws/.").workspace == (tmp_path / "ws").resolve()
    assert load(repo, RUN_WORKSPACE="ws").workspace.is_absolute()


def test_workspace_must_be_a_directory(repo, tmp_path):
    (tmp_path / "file").write_text("")
    assert "must be an existing directory" in str(error_of(repo, RUN_WORKSPACE=str(tmp_path / "file")))


def test_a_missing_default_workspace_is_reported_as_the_default(tmp_path):
    with pytest.raises(ConfigError) as raised:
        config.load({}, tmp_path)
    assert str(raised.value) == (
        f"RUN_WORKSPACE={str((tmp_path / 'langs').resolve())!r} (the default):"
        " must be an existing directory (the folder of language workspaces)"
    )


# --- RUN_READONLY_PATHS ---


@pytest.mark.parametrize(
    "value, extra",
    [
        ("/opt/a", ("/opt/a",)),
        ("/opt/a,/opt/b/", ("/opt/a", "/opt/b")),
        (" /opt/a , ,/opt/a/.", ("/opt/a",)),
        ("/usr,/opt//x/./y", ("/opt/x/y",)),
        ("//opt", ("/opt",)),
        ("/etc/ld.so.cache,/srv", ("/srv",)),
    ],
)
def test_readonly_paths_extend_the_defaults(repo, value, extra):
    assert load(repo, RUN_READONLY_PATHS=value).readonly_paths == config.DEFAULT_READONLY_PATHS + extra


# --- per-language variables ---


def test_per_slug_sizes_are_parsed_and_sorted(repo):
    cfg = load(repo, RUN_TMP_SIZE_PYTHON="64m", RUN_TMP_SIZE_CPP="1g", RUN_CGROUP_MEMORY_MAX_JAVA="2g")
    assert cfg.tmp_size_by_slug == (("cpp", GiB), ("python", 64 * MiB))
    assert cfg.cgroup_memory_max_by_slug == (("java", 2 * GiB),)
    assert cfg.warnings == ()


@pytest.mark.parametrize(
    "variable",
    ["RUN_TMP_SIZE_python", "RUN_TMP_SIZE_Python", "RUN_TMP_SIZE_COBOL", "RUN_TMP_SIZE_",
     "RUN_CGROUP_MEMORY_MAX_python", "RUN_CGROUP_MEMORY_MAX_COBOL"],
)  # fmt: skip
def test_per_slug_variable_needs_an_upper_case_known_slug(repo, variable):
    message = str(error_of(repo, **{variable: "64m"}))
    assert message.startswith(f"{variable}='64m': ")
    assert "not an upper-case language slug" in message
    assert all(slug.upper() in message for slug in langs.LANGUAGES)


@pytest.mark.parametrize(
    "variable, value",
    [("RUN_TMP_SIZE_PYTHON", "1023k"), ("RUN_TMP_SIZE_PYTHON", "big"),
     ("RUN_CGROUP_MEMORY_MAX_JS", "15m"), ("RUN_CGROUP_MEMORY_MAX_JS", "1.5g")],
)  # fmt: skip
def test_per_slug_sizes_have_minimums(repo, variable, value):
    assert str(error_of(repo, **{variable: value})).startswith(f"{variable}={value!r}: must be a size")


def test_tmp_size_precedence(repo):
    own = langs.LANGUAGES["python"].tmp_size
    assert load(repo).tmp_size_for("python") == own == 256 * MiB
    general = load(repo, RUN_SANDBOX_TMP_SIZE="32m")
    assert general.tmp_size_for("python") == general.tmp_size_for("js") == 32 * MiB
    both = load(repo, RUN_SANDBOX_TMP_SIZE="32m", RUN_TMP_SIZE_PYTHON="100m")
    assert both.tmp_size_for("python") == 100 * MiB
    assert both.tmp_size_for("js") == 32 * MiB
    only_slug = load(repo, RUN_TMP_SIZE_PYTHON="100m")
    assert only_slug.tmp_size_for("python") == 100 * MiB
    assert only_slug.tmp_size_for("cpp") == langs.LANGUAGES["cpp"].tmp_size


def test_memory_max_precedence(repo, monkeypatch):
    assert load(repo).memory_max_for("python") == GiB
    assert load(repo, RUN_CGROUP_MEMORY_MAX="2g").memory_max_for("python") == 2 * GiB
    python = dataclasses.replace(langs.LANGUAGES["python"], memory_max=512 * MiB)
    monkeypatch.setitem(langs.LANGUAGES, "python", python)
    assert load(repo).memory_max_for("python") == 512 * MiB  # the language's own replaces kiln's default
    assert load(repo, RUN_CGROUP_MEMORY_MAX="2g").memory_max_for("python") == 2 * GiB  # the operator's holds
    assert load(repo, RUN_CGROUP_MEMORY_MAX="256m").memory_max_for("python") == 256 * MiB
    assert load(repo, RUN_CGROUP_MEMORY_MAX="2g").memory_max_for("js") == 2 * GiB
    overridden = load(repo, RUN_CGROUP_MEMORY_MAX="2g", RUN_CGROUP_MEMORY_MAX_PYTHON="3g")
    assert overridden.memory_max_for("python") == 3 * GiB


def test_pids_max_comes_from_the_language_unless_the_operator_set_one(repo, monkeypatch):
    cfg = load(repo, RUN_PIDS_MAX="100")
    assert cfg.pids_max_for("python") == 100
    monkeypatch.setitem(langs.LANGUAGES, "java", dataclasses.replace(langs.LANGUAGES["java"], pids_max=1024))
    assert cfg.pids_max_for("java") == 100  # the operator's limit holds for every language
    assert load(repo).pids_max_for("java") == 1024  # a language's own replaces kiln's default only
    assert load(repo).pids_max_for("python") == load(repo).pids_max_for("golang") == 256  # DESIGN: RUN_PIDS_MAX for all


# --- sandbox_env ---


def test_sandbox_env_takes_locale_timezone_and_allowed_keys_only(repo):
    environ = {
        "TZ": "UTC",
        "SECRET": "x",
        "FOO": "foo",
        "LC_ALL": "C.UTF-8",
        "PATH": "/home/dev/.pyenv/shims:/usr/bin",
        "HOME": "/root",
        "LANG": "en_US.UTF-8",
        "EMPTY": "",
        "RUN_ENV_ALLOW": "FOO, MISSING,TZ,EMPTY,LANG",
    }
    cfg = config.load(environ, repo)
    assert cfg.env_allow == ("FOO", "MISSING", "TZ", "EMPTY", "LANG")
    assert cfg.sandbox_env == (
        ("LANG", "en_US.UTF-8"),
        ("LC_ALL", "C.UTF-8"),
        ("TZ", "UTC"),
        ("FOO", "foo"),
        ("EMPTY", ""),
    )


def test_sandbox_env_is_empty_when_nothing_is_present(repo):
    assert config.load({"RUN_ENV_ALLOW": "FOO", "HOME": "/root"}, repo).sandbox_env == ()


# --- unknown RUN_ variables ---


def test_unknown_run_variables_become_warnings_with_a_suggestion(repo):
    cfg = load(repo, RUN_CONCURENCY="5", RUN_TMPSIZE_PYTHON="1g", RUN_ZZZZZZZZZZZZ="1")
    assert cfg.concurrency == 10
    assert cfg.warnings == (
        "RUN_CONCURENCY is not a kiln setting (did you mean RUN_CONCURRENCY?)",
        "RUN_TMPSIZE_PYTHON is not a kiln setting (did you mean RUN_TMP_SIZE_PYTHON?)",
        "RUN_ZZZZZZZZZZZZ is not a kiln setting",
    )


def test_only_run_variables_are_checked(repo):
    assert config.load({"PORTT": "1", "HOME": "/root", "run_concurrency": "1", "DEBUGG": "1"}, repo).warnings == ()


def test_a_run_variable_passed_to_the_sandbox_is_not_a_typo(repo):
    cfg = load(repo, RUN_ENV_ALLOW="RUN_MY_TOKEN", RUN_MY_TOKEN="t")
    assert cfg.warnings == ()
    assert cfg.sandbox_env == (("RUN_MY_TOKEN", "t"),)


# --- summary ---


def test_summary_formats_units_and_hides_secrets(repo, tmp_path):
    cfg = load(
        repo,
        RUN_API_KEYS="alpha-key,beta-key",
        RUN_OUTPUT_MAX="0",
        RUN_MEMORY_MAX="512m",
        RUN_TMP_SIZE_GOLANG="1g",
        RUN_CGROUP_MEMORY_MAX_JAVA="1536m",
        RUN_TIMEOUT_MAX="10s",
        RUN_SHUTDOWN_GRACE="1500ms",
        RUN_ENV_ALLOW="TOKEN",
        TOKEN="tok-value",
        LANG="C.UTF-8",
        RUN_LANGS="python,js",
    )
    summary = cfg.summary()
    text = json.dumps(summary)
    assert "alpha-key" not in text and "tok-value" not in text
    assert summary["api_keys"] == 2
    assert summary["output_max"] == "64m"
    assert summary["input_max"] == "1m"
    assert summary["memory_max"] == "512m"
    assert summary["cgroup_memory_max"] == "1g"
    assert summary["tmp_size_by_slug"] == {"golang": "1g"}
    assert summary["cgroup_memory_max_by_slug"] == {"java": "1536m"}
    assert summary["timeout_max"] == "10s"
    assert summary["default_timeout"] == "10s"
    assert summary["shutdown_grace"] == "1500ms"
    assert summary["sandbox_env"] == ["LANG", "TOKEN"]
    assert summary["langs"] == ["python", "js"]
    assert summary["workspace"] == str((repo / "langs").resolve())
    # Every field but the derived/secret ones appears under its own name or its unit-less one.
    for field in dataclasses.fields(Config):
        assert field.name in summary or field.name.removesuffix("_ms") in summary or field.name == "warnings"


def test_summary_of_defaults(repo):
    summary = load(repo).summary()
    assert summary["memory_max"] == "off"
    assert summary["sandbox_tmp_size"] is None
    assert summary["langs"] is None
    assert summary["api_keys"] == 0
    assert json.loads(json.dumps(summary)) == summary


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, Systemd()),
        ({"NOTIFY_SOCKET": "/run/systemd/notify"}, Systemd(notify_socket="/run/systemd/notify")),
        ({"NOTIFY_SOCKET": "@abstract"}, Systemd(notify_socket="@abstract")),
        ({"WATCHDOG_USEC": "30000000"}, Systemd(watchdog_usec=30_000_000)),
        ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "4242"}, Systemd(watchdog_usec=30_000_000)),
        ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "99"}, Systemd()),  # meant for another process
        ({"WATCHDOG_USEC": "soon"}, Systemd()),
        ({"LISTEN_FDS": "1", "LISTEN_PID": "4242"}, Systemd(listen_fds=1)),
        ({"LISTEN_FDS": "1", "LISTEN_PID": "99"}, Systemd()),
        ({"LISTEN_FDS": "1"}, Systemd()),  # without LISTEN_PID the fds are not ours to take
    ],
)
def test_systemd_protocol_variables(repo, environ, expected):
    assert config.load(environ, repo, pid=4242).systemd == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("true", None), ("yes", None), ("false", ()), ("0", ()), ("python", ("python",)), ("python, elixir", ("python", "elixir"))],
)
def test_run_prestart_is_all_none_or_some_languages(repo, text, expected):
    cfg = load(repo, RUN_PRESTART=text)
    assert cfg.prestart == expected
    assert cfg.prestarts("python") == (expected is None or "python" in expected)
    assert cfg.prestarts("clojure") == (expected is None)


def test_run_prestart_names_what_it_accepts(repo):
    with pytest.raises(ConfigError, match=r"RUN_PRESTART='cobol': must be true, false or language slugs"):
        load(repo, RUN_PRESTART="cobol")


def test_systemd_numbers_are_ascii_digits_only(repo):
    """WATCHDOG_USEC and LISTEN_FDS come from the service manager; anything but ASCII digits is
    ignored, never a crash at startup (hypothesis found "¹", which isdigit() accepts)."""
    cfg = config.load({"WATCHDOG_USEC": "¹", "LISTEN_FDS": "٣", "LISTEN_PID": "0"}, repo)
    assert cfg.systemd.watchdog_usec is None and cfg.systemd.listen_fds == 0


def test_the_summary_shows_every_setting_of_the_table(repo):
    """Config.summary is derived from the settings table: a new setting is in the startup log
    without a second list to keep."""
    from kiln.config import _SETTINGS

    summary = load(repo).summary()
    assert {setting.field.removesuffix("_ms") for setting in _SETTINGS} <= set(summary)
