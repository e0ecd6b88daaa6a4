"""Every setting, parsed once from the environment into a frozen Config.

`load()` is the only code in kiln that reads environment variables; the rest of kiln receives the
Config. A value that does not parse stops startup: every problem is collected and reported at
once, one per line, so an operator fixes them all in one go.

Longer than kiln's ~400 lines on purpose: every setting's field, parser, default and summary line
are here and nowhere else.
"""

from __future__ import annotations

import difflib
import os
import pathlib
import posixpath
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kiln import langs, units
from kiln.units import MiB

# RUN_OUTPUT_MAX=0 lifts the per-stream cap, but output is never unbounded: it stops here.
OUTPUT_CEILING = 64 * MiB
DEFAULT_READONLY_PATHS = ("/usr", "/etc/alternatives", "/etc/ld.so.cache")
# Inherited by the task from the service's environment when present, before RUN_ENV_ALLOW keys.
INHERITED_ENV = ("LANG", "LC_ALL", "TZ")
# Slot uids run up to RUN_UID_BASE + 256 (the largest RUN_CONCURRENCY), which must stay below
# 2**31 - 1, the largest uid; uids below 1000 belong to the host's system accounts.
UID_BASE_MIN, UID_BASE_MAX = 1000, 2**31 - 1 - 256 - 1

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_API_KEY = re.compile(r"[\x21-\x7e]+")  # printable ASCII, no space
_WHOLE_NUMBER = re.compile(r"[0-9]{1,12}")


class ConfigError(Exception):
    """One or more settings are invalid; `problems` holds one line per problem."""

    def __init__(self, problems: list[str]):
        self.problems = tuple(problems)
        super().__init__("\n".join(self.problems))


@dataclass(frozen=True)
class Config:
    port: int
    host: str
    allow_shutdown: bool
    concurrency: int
    input_max: int
    output_max: int
    debug: bool
    uid_base: int
    env_allow: tuple[str, ...]
    sandbox_env: tuple[tuple[str, str], ...]
    memory_max: int
    sandbox_tmp_size: int | None
    tmp_size_by_slug: tuple[tuple[str, int], ...]
    workspace: pathlib.Path
    timeout_max_ms: int
    cgroup: str
    cgroup_memory_max: int
    cgroup_memory_max_by_slug: tuple[tuple[str, int], ...]
    pids_max: int
    tmp_inodes: int
    readonly_paths: tuple[str, ...]
    front_user: str
    langs: tuple[str, ...] | None
    prestart: tuple[str, ...] | None  # None: every workspace that has a prestart target
    templates: tuple[str, ...] | None  # None: every prestarting workspace with a template target
    api_keys: tuple[str, ...]
    sandbox_path: str
    shutdown_grace_ms: int
    read_timeout_ms: int
    idle_timeout_ms: int
    connections_max: int
    queue_wait_ms: int
    queue_max: int
    judge_input_max: int
    judge_bodies_max: int
    judge_tests_max: int
    judge_time_max_ms: int
    judge_parallel: int
    judge_max: int
    build_cache_max: int  # 0: no build cache
    file_max: int
    file_store: pathlib.Path
    file_store_max: int
    instance: str
    log_format: str
    warnings: tuple[str, ...]
    systemd: "Systemd"
    given: frozenset[str] = field(default=frozenset(), compare=False)  # the settings the environment gave, not defaulted

    @property
    def default_timeout_ms(self) -> int:
        return min(30_000, self.timeout_max_ms)

    @property
    def judge_part_max(self) -> int:
        """A judge job's file or stdin, and a build's files together: a request's own text, or
        a file of the store (kiln-init's bound, written in its recipe)."""
        return max(self.judge_input_max, self.file_max)

    def prestarts(self, slug: str) -> bool:
        """Whether RUN_PRESTART lets `slug`'s slots be prestarted (if its workspace can)."""
        return self.prestart is None or slug in self.prestart

    def forks(self, slug: str) -> bool:
        """Whether RUN_TEMPLATES lets `slug`'s prestarted tasks be forked from its template."""
        return self.templates is None or slug in self.templates

    def tmp_size_for(self, slug: str) -> int:
        """RUN_TMP_SIZE_<SLUG>, else RUN_SANDBOX_TMP_SIZE, else the language's own size."""
        override = dict(self.tmp_size_by_slug).get(slug, self.sandbox_tmp_size)
        return override if override is not None else langs.LANGUAGES[slug].tmp_size

    def memory_max_for(self, slug: str) -> int:
        """RUN_CGROUP_MEMORY_MAX_<SLUG>, else RUN_CGROUP_MEMORY_MAX as the operator gave it, else
        the language's own default (a compiler that needs more), else RUN_CGROUP_MEMORY_MAX's."""
        return dict(self.cgroup_memory_max_by_slug).get(slug) or self._global_or_own("RUN_CGROUP_MEMORY_MAX", self.cgroup_memory_max, langs.LANGUAGES[slug].memory_max)

    def pids_max_for(self, slug: str) -> int:
        """RUN_PIDS_MAX as the operator gave it, else the language's own default, else its default."""
        return self._global_or_own("RUN_PIDS_MAX", self.pids_max, langs.LANGUAGES[slug].pids_max)

    def _global_or_own(self, variable: str, value: int, own: int | None) -> int:
        # a limit the operator set holds for every language; a language's own only replaces kiln's default
        return value if variable in self.given or own is None else own

    def summary(self) -> dict[str, Any]:
        """Every effective setting, for the startup log (JSON-ready, without secrets): each of
        the settings table's fields as its parser shows it (sizes and durations in their units;
        a duration's key without its `_ms`), in the table's order, with what is derived."""
        shown: dict[str, Any] = {}
        for setting in _SETTINGS:
            value = getattr(self, setting.field)
            key = setting.field.removesuffix("_ms")
            shown[key] = _SHOWN_SPECIALLY[setting.field](value) if setting.field in _SHOWN_SPECIALLY else _shown(setting, value)
            if setting.field == "env_allow":
                # names only: an allowed variable may hold a token the operator would not log
                shown["sandbox_env"] = [name for name, _ in self.sandbox_env]
            if setting.field == "timeout_max_ms":
                shown["default_timeout"] = units.format_duration_ms(self.default_timeout_ms)
        size = units.format_size
        shown["tmp_size_by_slug"] = {slug: size(n) for slug, n in self.tmp_size_by_slug}
        shown["cgroup_memory_max_by_slug"] = {s: size(n) for s, n in self.cgroup_memory_max_by_slug}
        shown["systemd"] = {"notify": self.systemd.notify_socket is not None, "watchdog_usec": self.systemd.watchdog_usec, "listen_fds": self.systemd.listen_fds}
        shown["given"] = sorted(self.given)
        return shown


def _shown(setting: _Setting, value: Any) -> Any:
    if setting.secret:
        return len(value)  # how many, never what
    if value is None or isinstance(value, (bool, str)):
        return value
    format_value = getattr(setting.parse, "shown", None)
    if format_value is not None:
        return format_value(value)
    if isinstance(value, tuple):
        return list(value)
    return value if isinstance(value, int) else str(value)


# the settings whose value says something other than itself
_SHOWN_SPECIALLY: dict[str, Callable[[Any], Any]] = {
    "memory_max": lambda n: units.format_size(n) if n else "off",
    "build_cache_max": lambda n: units.format_size(n) if n else "off",
    "prestart": lambda slugs: "all" if slugs is None else list(slugs),
    "templates": lambda slugs: "all" if slugs is None else list(slugs),
}


@dataclass(frozen=True)
class Systemd:
    """What systemd hands the main process (sd_notify(3), sd_listen_fds(3)); not settings."""

    notify_socket: str | None = None  # NOTIFY_SOCKET: READY=1, WATCHDOG=1, STOPPING=1 go there
    watchdog_usec: int | None = None  # WATCHDOG_USEC, when WATCHDOG_PID is unset or us
    listen_fds: int = 0  # LISTEN_FDS passed to us (LISTEN_PID): fd 3 is the listening socket


def _systemd(environ: Mapping[str, str], pid: int) -> Systemd:
    def ours(variable: str) -> bool:  # systemd names the pid the variable is meant for
        return environ.get(variable, str(pid)) == str(pid)

    def number(variable: str) -> int | None:
        text = environ.get(variable, "")
        return int(text) if _WHOLE_NUMBER.fullmatch(text) else None  # isdigit() takes "¹", int() does not

    return Systemd(
        notify_socket=environ.get("NOTIFY_SOCKET") or None,
        watchdog_usec=number("WATCHDOG_USEC") if ours("WATCHDOG_PID") else None,
        listen_fds=(number("LISTEN_FDS") or 0) if "LISTEN_PID" in environ and ours("LISTEN_PID") else 0,
    )


# --- value parsers: each takes the raw text and raises ValueError saying what is accepted ---


def _digits(text: str) -> int:
    # int() would also take " 7", "+7", "1_0" and non-ASCII digits; the docs promise digits.
    if not _WHOLE_NUMBER.fullmatch(text):
        raise ValueError("not ASCII digits")
    return int(text)


def _bounded(parse: Callable[[str], int], accepted: str, low: int, high: int | None = None, shown: Callable[[int], str] | None = None):
    def check(text: str) -> int:
        try:
            value = parse(text)
        except ValueError:
            raise ValueError(accepted) from None
        if value < low or (high is not None and value > high):
            raise ValueError(accepted)
        return value

    check.shown = shown  # how Config.summary shows a value it parsed (None: as it is)
    return check


def _whole_number(low: int, high: int, why: str = "") -> Callable[[str], int]:
    return _bounded(_digits, f"must be a whole number from {low} to {high}{why}", low, high)


def _size(low: int, high: int | None = None, note: str = "") -> Callable[[str], int]:
    fmt = units.format_size
    if high is not None:
        bounds = f", from {fmt(low)} to {fmt(high)}"
    else:
        bounds = f", at least {fmt(low)}" if low else ""
    accepted = f"must be a size in bytes or with a k, m or g suffix (e.g. 64m){bounds}{note}"
    return _bounded(units.parse_size, accepted, low, high, shown=fmt)


def _duration(low_ms: int) -> Callable[[str], int]:
    accepted = f"must be a duration like 500ms, 30s or 5m, at least {units.format_duration_ms(low_ms)}"
    return _bounded(_duration_or_zero, accepted, low_ms, shown=units.format_duration_ms)


def _duration_or_zero(text: str) -> int:
    """A setting's duration; a bare 0 is none, whatever the unit (RUN_QUEUE_WAIT=0: at once)."""
    return 0 if text == "0" else units.parse_duration_ms(text)


_uid_base = _whole_number(
    UID_BASE_MIN,
    UID_BASE_MAX,
    " (uids below 1000 belong to system accounts; RUN_UID_BASE + 256 must stay below 2**31 - 1)",
)
_output_cap = _size(0, OUTPUT_CEILING, note="; 0 means that ceiling")


def _output_max(text: str) -> int:
    return _output_cap(text) or OUTPUT_CEILING


_output_max.shown = units.format_size


def _boolean(text: str) -> bool:
    try:
        return units.parse_bool(text)
    except ValueError:
        raise ValueError("must be 1, true, yes, 0, false or no") from None


def _debug(text: str) -> bool:
    # As in the original runner, DEBUG set to nothing at all enables debugging.
    return text == "" or _boolean(text)


def _matching(pattern: str, accepted: str) -> Callable[[str], str]:
    compiled = re.compile(pattern, re.DOTALL)

    def parse(text: str) -> str:
        if not compiled.fullmatch(text):
            raise ValueError(accepted)
        return text

    return parse


_non_empty = _matching(r".*\S.*", "must not be empty or blank")
_cgroup_mode = _matching("auto|v2|v1|off", "must be one of auto, v2, v1, off")
_log_format = _matching("logfmt|json", "must be logfmt or json")
# The instance names a cgroup and a pidfile: keep it to characters safe in both.
_instance = _matching(r"[a-z][a-z0-9_-]{0,31}", "must be 1 to 32 of a-z 0-9 _ -, starting with a-z")


def _items(text: str) -> tuple[str, ...]:
    """Comma-separated items, stripped; empty ones and repeats dropped, first order kept."""
    return tuple(dict.fromkeys(item.strip() for item in text.split(",") if item.strip()))


def _env_names(text: str) -> tuple[str, ...]:
    for name in _items(text):
        if not _ENV_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not a variable name (letters, digits, _; no leading digit)")
        if name in ("PATH", "HOME"):
            raise ValueError(f"{name} is set by kiln (PATH from RUN_SANDBOX_PATH) and cannot be passed")
        if _is_kiln_variable(name):
            raise ValueError(f"{name} is a kiln setting and is never passed to submitted code")
    return _items(text)


def _slugs(text: str) -> tuple[str, ...] | None:
    for slug in _items(text):
        if slug not in langs.LANGUAGES:
            raise ValueError(f"{slug!r} is not a language; use any of {', '.join(langs.LANGUAGES)}")
    return _items(text) or None


def _prestart(text: str) -> tuple[str, ...] | None:
    """true: every workspace with a prestart target (None); false: none (); else those slugs."""
    try:
        return None if units.parse_bool(text) else ()
    except ValueError:
        pass
    try:
        slugs = _slugs(text)
    except ValueError as error:
        raise ValueError(f"must be true, false or language slugs: {error}") from None
    if not slugs:
        raise ValueError("must be true, false or language slugs")
    return slugs


def _api_keys(text: str) -> tuple[str, ...]:
    for number, key in enumerate(_items(text), 1):
        if not _API_KEY.fullmatch(key):
            raise ValueError(f"key #{number} has a space or a character outside printable ASCII")
    return _items(text)


def _readonly_paths(text: str) -> tuple[str, ...]:
    extra = []
    for path in _items(text):
        if not path.startswith("/") or ".." in path.split("/"):
            raise ValueError(f"{path!r} is not an absolute path without '..'")
        # normpath keeps a leading '//' (POSIX lets it mean something else); kiln does not.
        normal = "/" + posixpath.normpath(path).lstrip("/")
        if normal == "/":
            raise ValueError(f"{path!r} is the root itself: the sandbox root is built by kiln")
        extra.append(normal)
    return tuple(dict.fromkeys(DEFAULT_READONLY_PATHS + tuple(extra)))


def _search_path(text: str) -> str:
    # An empty entry would mean "the current directory" to a shell: never what is wanted.
    if not all(entry.startswith("/") for entry in text.split(":")):
        raise ValueError("must be absolute directories separated by ':' (e.g. /usr/local/bin:/usr/bin)")
    return text


def _directory(text: str) -> pathlib.Path:
    try:
        path = pathlib.Path(text).resolve() if text else None
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop, before Python 3.13
        path = None
    try:
        found = path is not None and path.is_dir()
    except OSError as error:  # a folder this user may not search (rootless kiln)
        raise ValueError(f"cannot be read by this user: {error.strerror}") from None
    if not found:
        raise ValueError("must be an existing directory (the folder of language workspaces)")
    return path


def _absolute_path(text: str) -> pathlib.Path:
    if not text.startswith("/") or "\0" in text or any(part == ".." for part in text.split("/")):
        raise ValueError("must be an absolute path without '..'")
    return pathlib.Path(posixpath.normpath(text))


@dataclass(frozen=True)
class _Setting:
    variable: str
    field: str
    parse: Callable[[str], Any]
    # In the variable's own syntax, parsed like a value from the environment. None: the field
    # is None when unset. List-like variables parse "" as their default, as the docs promise.
    default: str | None
    secret: bool = False  # never echo the value in an error


_SETTINGS = (
    _Setting("PORT", "port", _whole_number(1, 65535), "4040"),
    _Setting("HOST", "host", _non_empty, "0.0.0.0"),
    _Setting("ALLOW_SHUTDOWN", "allow_shutdown", _boolean, "false"),
    _Setting("RUN_CONCURRENCY", "concurrency", _whole_number(1, 256), "10"),
    _Setting("RUN_INPUT_MAX", "input_max", _size(1), "1m"),
    _Setting("RUN_OUTPUT_MAX", "output_max", _output_max, "1m"),
    _Setting("DEBUG", "debug", _debug, "false"),
    _Setting("RUN_UID_BASE", "uid_base", _uid_base, "10001"),
    _Setting("RUN_ENV_ALLOW", "env_allow", _env_names, ""),
    _Setting("RUN_MEMORY_MAX", "memory_max", _size(0, note="; 0 means no address-space limit"), "0"),
    _Setting("RUN_SANDBOX_TMP_SIZE", "sandbox_tmp_size", _size(MiB), None),
    _Setting("RUN_WORKSPACE", "workspace", _directory, None),  # load() supplies <repo_root>/langs
    _Setting("RUN_TIMEOUT_MAX", "timeout_max_ms", _duration(1), "5m"),
    _Setting("RUN_CGROUP", "cgroup", _cgroup_mode, "auto"),
    _Setting("RUN_CGROUP_MEMORY_MAX", "cgroup_memory_max", _size(16 * MiB), "1g"),
    _Setting("RUN_PIDS_MAX", "pids_max", _whole_number(8, 65536), "256"),
    _Setting("RUN_TMP_INODES", "tmp_inodes", _whole_number(64, 10_000_000), "16384"),
    _Setting("RUN_READONLY_PATHS", "readonly_paths", _readonly_paths, ""),
    # kiln's own user (scripts/setup.sh makes it): the cached builds and the file store are its
    _Setting("RUN_FRONT_USER", "front_user", _non_empty, "kiln"),
    _Setting("RUN_LANGS", "langs", _slugs, None),
    _Setting("RUN_PRESTART", "prestart", _prestart, "true"),
    _Setting("RUN_TEMPLATES", "templates", _prestart, "true"),
    _Setting("RUN_API_KEYS", "api_keys", _api_keys, "", secret=True),
    _Setting("RUN_SANDBOX_PATH", "sandbox_path", _search_path, "/usr/local/bin:/usr/bin:/bin"),
    _Setting("RUN_SHUTDOWN_GRACE", "shutdown_grace_ms", _duration(0), "30s"),
    # a client has this long to send a whole request once its first byte came (408 after); a
    # kept-alive connection with no request started is closed after RUN_IDLE_TIMEOUT; past
    # RUN_CONNECTIONS_MAX open connections a new one is answered 503 and closed
    _Setting("RUN_READ_TIMEOUT", "read_timeout_ms", _duration(100), "10s"),
    _Setting("RUN_IDLE_TIMEOUT", "idle_timeout_ms", _duration(100), "60s"),
    _Setting("RUN_CONNECTIONS_MAX", "connections_max", _whole_number(1, 1_000_000), "1000"),
    # a run that finds every slot busy waits its turn this long (never past its own timeout), in
    # a queue of this many; 0 s: refused at once (429), as the original runner did
    _Setting("RUN_QUEUE_WAIT", "queue_wait_ms", _duration(0), "5s"),
    _Setting("RUN_QUEUE_MAX", "queue_max", _whole_number(0, 65536), None),  # load(): 4 x RUN_CONCURRENCY
    # POST /judge (DESIGN.md "Judge API"): its body, its tests, a test's CPU time, how many slots
    # one judge request's tests take at a time (default: half the slots, at least one)
    _Setting("RUN_JUDGE_INPUT_MAX", "judge_input_max", _size(1), "16m"),
    # what the judge requests in flight may hold of the front's memory, twice their bodies
    # (kiln/http/bodies.py); default an eighth of the host's memory, at most 64 of the largest
    _Setting("RUN_JUDGE_BODIES_MAX", "judge_bodies_max", _size(1), None),
    _Setting("RUN_JUDGE_TESTS_MAX", "judge_tests_max", _whole_number(1, 100_000), "1000"),
    _Setting("RUN_JUDGE_TIME_MAX", "judge_time_max_ms", _duration(1), "10s"),
    _Setting("RUN_JUDGE_PARALLEL", "judge_parallel", _whole_number(1, 256), None),  # load(): RUN_CONCURRENCY / 2
    # judge requests judged at once; one more waits its turn for admission as a run does for a
    # slot (RUN_QUEUE_WAIT, RUN_QUEUE_MAX, then 429). Default RUN_CONCURRENCY / RUN_JUDGE_PARALLEL,
    # at least 1: the admitted requests' tests then ask for at most RUN_CONCURRENCY turns at once,
    # so a /run queued behind them waits about one round of tests, never their whole requests
    _Setting("RUN_JUDGE_MAX", "judge_max", _whole_number(1, 65536), None),
    _Setting("RUN_BUILD_CACHE_MAX", "build_cache_max", _size(0, note="; 0 turns the build cache off"), "512m"),
    # the file store (/files): one file's size, where the files are kept, their total
    _Setting("RUN_FILE_MAX", "file_max", _size(0), "64m"),
    _Setting("RUN_FILE_STORE", "file_store", _absolute_path, None),  # load(): /var/lib/<instance>/files
    _Setting("RUN_FILE_STORE_MAX", "file_store_max", _size(0), "4g"),
    _Setting("RUN_INSTANCE", "instance", _instance, "kiln"),
    _Setting("RUN_LOG_FORMAT", "log_format", _log_format, "logfmt"),
)

# One variable per language, named with the upper-case slug: prefix -> (Config field, parser).
_PER_SLUG = {
    "RUN_TMP_SIZE_": ("tmp_size_by_slug", _size(MiB)),
    "RUN_CGROUP_MEMORY_MAX_": ("cgroup_memory_max_by_slug", _size(16 * MiB)),
}
_KNOWN = frozenset(
    [s.variable for s in _SETTINGS] + [p + slug.upper() for p in _PER_SLUG for slug in langs.LANGUAGES]
)


def _is_kiln_variable(name: str) -> bool:
    return name in _KNOWN or name.startswith(tuple(_PER_SLUG))


def load(environ: Mapping[str, str], repo_root: pathlib.Path, pid: int = 0) -> Config:
    """Parse every setting from `environ`; raise ConfigError listing every invalid one.
    `pid` is the main process's, for the systemd variables addressed to one pid."""
    defaults = {"RUN_WORKSPACE": str(pathlib.Path(repo_root).resolve() / "langs")}
    values: dict[str, Any] = {}
    problems: list[str] = []

    def parse(variable: str, parser: Callable, text: str, *, secret=False, from_default=False) -> Any:
        try:
            return parser(text)
        except ValueError as error:
            shown = "<hidden>" if secret else repr(text)
            origin = " (the default)" if from_default else ""
            hint = "; or unset it to use the default" if text == "" else ""
            problems.append(f"{variable}={shown}{origin}: {error}{hint}")

    for setting in _SETTINGS:
        text = environ.get(setting.variable)
        from_default = text is None
        if from_default:
            text = defaults.get(setting.variable, setting.default)
        values[setting.field] = None if text is None else parse(
            setting.variable, setting.parse, text, secret=setting.secret, from_default=from_default
        )

    valid_suffixes = ", ".join(slug.upper() for slug in langs.LANGUAGES)
    for prefix, (field, parser) in _PER_SLUG.items():
        by_slug = {}
        for variable in sorted(name for name in environ if name.startswith(prefix)):
            suffix = variable[len(prefix):]
            if suffix.lower() in langs.LANGUAGES and suffix == suffix.upper():
                by_slug[suffix.lower()] = parse(variable, parser, environ[variable])
            else:
                problems.append(f"{variable}={environ[variable]!r}: {suffix!r} is not an upper-case"
                                f" language slug; use one of {valid_suffixes}")
        values[field] = tuple(sorted(by_slug.items()))

    if problems:
        raise ConfigError(problems)
    if values["queue_max"] is None:
        values["queue_max"] = 4 * values["concurrency"]
    if values["judge_parallel"] is None:
        values["judge_parallel"] = max(1, values["concurrency"] // 2)
    if values["judge_max"] is None:
        values["judge_max"] = max(1, values["concurrency"] // values["judge_parallel"])
    if values["judge_bodies_max"] is None:
        values["judge_bodies_max"] = min(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 8, 64 * 2 * values["judge_input_max"])
    if values["file_store"] is None:
        values["file_store"] = pathlib.Path("/var/lib", values["instance"], "files")
    inherited = dict.fromkeys(INHERITED_ENV + values["env_allow"])
    values["sandbox_env"] = tuple((name, environ[name]) for name in inherited if name in environ)
    values["warnings"] = _unknown_variable_warnings(environ, values["env_allow"])
    values["systemd"] = _systemd(environ, pid)
    values["given"] = frozenset(setting.variable for setting in _SETTINGS if setting.variable in environ)
    return Config(**values)


def _unknown_variable_warnings(environ: Mapping[str, str], passed: tuple[str, ...]) -> tuple[str, ...]:
    # Without this, a misspelt RUN_ variable is ignored in silence and its default applies.
    warnings = []
    for name in sorted(environ):
        if name.startswith("RUN_") and not _is_kiln_variable(name) and name not in passed:
            close = difflib.get_close_matches(name, _KNOWN, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            warnings.append(f"{name} is not a kiln setting{hint}")
    return tuple(warnings)
