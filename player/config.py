"""The display's configuration: what its owner sets once, in a TOML file.

Layers, later ones win: built-in defaults, the file (``--config FILE`` or ``$PDN_CONFIG``), the
environment (``PDN_API_TOKEN``; a token never goes on a command line, where ``ps`` shows it),
then command-line flags. Example (every key is optional)::

    name = "Lobby screen"
    timezone = "Europe/London"          # IANA name; default: the system's
    accept_cds = true                   # false: single items (JSON) only, a CDS gets 415
    allowed_origins = ["https://signage.example.org"]   # empty/absent: any http(s) origin
    api_token = "change-me"             # state-changing requests need it as a Bearer token
    protect_reads = false               # true: reads (screenshot, health...) need it too
    public_url = "http://10.0.0.5:8080" # how others reach this display (webhook payloads)
    data_dir = "/var/lib/pdn"
    schedule = "http://10.0.0.9:8090/schedule/lobby/"  # follow this schedule of a scheduler
    register = "http://10.0.0.9:8090"   # register with this scheduler (needs [location]);
                                        # 'scheduler' is another name for it
    groups = ["lobby", "floor-2"]       # groups it declares at the scheduler (assignment)
    play_log_rows = 1000000             # plays the play log keeps at most (GET /x/plays)
    scheduler_token = "..."             # the scheduler's enrolment token: approved at once
                                        # (else it waits for an operator); PDN_SCHEDULER_TOKEN

    [location]
    latitude = "N54.0104"               # or "N 54 00.624"
    longitude = "W2 47.22"

    [listen]
    host = "0.0.0.0"
    port = 8080
    tls = true                          # HTTPS; a self-signed certificate in data_dir
    tls-cert = "/etc/pdn/cert.pem"      # or the operator's own (with tls-key)
    tls-key = "/etc/pdn/key.pem"
    hosts = ["signage-3.lan"]           # names it is reached by (Host), beyond its address

    [screen]                            # read by the renderer
    index = 0                           # which screen, when several are attached
    rotation = 0                        # 0, 90, 180 or 270 degrees
    crossfade = 0.3                     # seconds of cross-fade between items; 0: cut
    compositor-check = 30               # seconds between looks at what the compositor shows
    timeout-factor = 1                  # multiplies the renderer's timeouts (an emulated board)
    audio = "on"                        # videos' sound: on (where a sound server runs), off
    video-backend = "auto"              # ffmpeg, gstreamer; auto: gstreamer on a Pi (videodecode)
    video-decoders = 2                  # 1: a decoder that takes one stream (docs/video.md)
    video-zones = "auto"                # zones of a layout playing videos at once; auto: 1 on
                                        # a Raspberry Pi, 2 elsewhere (docs/cds.md, Zones)
    ticker-speed = 120                  # a zone's ticker, px/s for a bar 108 px high
    memory-budget = "auto"              # "600M", "1.5G" or MiB; auto: from the board's RAM
    low-memory = "auto"                 # on, off; auto: on below 1.5 GiB of RAM
    wall = {columns = 2, rows = 2, column = 0, row = 1, bezel = 0.02}  # a video wall's tile

    [power]                             # daily screen on/off: player/power.py
    [clock]                             # clock sanity: player/clocksanity.py

Key names may use ``_`` or ``-``. Unknown keys and bad values are refused, every one of them at
once, each with a message that names it and, for a misspelt key, the key meant ("did you mean
'rotation'?") (:class:`ConfigError`); ``pdn display`` then exits with code 2. Each section is a
typed field of :class:`DisplayConfig`, parsed by the module that uses it.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cds.streams import STREAM_SCHEMES
from cds.timezone import system_timezone_name
from player.cachefiles import CacheConfig, parse_cache_config
from player.clocksanity import ClockConfig, parse_clock_config
from player.power import PowerConfig, parse_power_config
from player.screenconfig import SCREEN_KEYS, ScreenConfig, parse_screen
from server.platform.validation import check_uri, parse_coordinate

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
DEFAULT_DATA_DIR = Path("data")


class ConfigError(Exception):
    """A bad configuration: one or more problems, each naming the key (and the file); the
    message has one problem per line."""

    def __init__(self, *problems: str) -> None:
        self.problems: list[str] = list(problems) or ["invalid configuration"]
        super().__init__("\n".join(self.problems))


@dataclass
class DisplayConfig:
    name: str | None = None
    location: dict[str, str] | None = None
    timezone: str = "UTC"
    api_token: str | None = None
    #: The scheduler's enrolment token, sent when registering and following.
    scheduler_token: str | None = None
    protect_reads: bool = False
    allowed_origins: tuple[str, ...] = ()
    accept_cds: bool = True
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    public_url: str | None = None
    tls: bool = False  # [listen] tls: serve HTTPS (server.platform.tls)
    tls_cert: Path | None = None  # [listen] tls-cert / tls-key: the operator's own files
    tls_key: Path | None = None
    #: [listen] hosts: the names (``name`` or ``name:port``) the display answers to besides
    #: its address, localhost and public_url's (server.display.access).
    listen_hosts: tuple[str, ...] = ()
    data_dir: Path = DEFAULT_DATA_DIR
    screen: ScreenConfig = field(default_factory=ScreenConfig)
    schedule_url: str | None = None  # follow this schedule of a scheduler (schedule = URL)
    register_url: str | None = None  # register with this scheduler (register = URL)
    groups: tuple[str, ...] = ()  # groups declared to the scheduler when registering
    #: The play log keeps at most this many plays, the oldest go first (player.store).
    play_log_rows: int = 1_000_000
    power: PowerConfig = field(default_factory=lambda: PowerConfig(schedule=None))
    clock: ClockConfig = field(default_factory=ClockConfig)
    cache: CacheConfig = field(default_factory=CacheConfig)
    source: Path | None = None

    def tzinfo(self) -> zoneinfo.ZoneInfo:
        return zoneinfo.ZoneInfo(self.timezone)

    def origin_allowed(self, url: str) -> bool:
        """True when ``url`` comes from an allowed origin (or no allowlist is set)."""
        if not self.allowed_origins:
            return True
        return origin_of(url) in self.allowed_origins

    def item_refusal(self, url: str) -> str | None:
        """Why a content item at ``url`` is not taken here (None when it is): its origin is not
        in ``allowed_origins``. A data: image or text carries its content and a clock
        (``pdn:clock``, taken by the parser for a clock alone) is the display's own: neither
        has an origin."""
        if url.split(":", 1)[0].strip().lower() in ("data", "pdn") or self.origin_allowed(url):
            return None
        return f"the origin {origin_of(url)} is not in this display's allowed_origins"


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` with the default port left out, lower case."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None or (scheme, port) in (("http", 80), ("https", 443), ("rtsp", 554)):
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


def default_data_dir() -> Path:
    """systemd's ``StateDirectory=`` when run as a service, else ``./data``."""
    state = os.environ.get("STATE_DIRECTORY")
    if state:
        return Path(state.split(":")[0])
    return DEFAULT_DATA_DIR


def _string(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"'{key}' must be a non-empty string")
    return value


def _bool(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"'{key}' must be true or false")
    return value


def _port(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
        raise ConfigError(f"'{key}' must be a port number from 0 to 65535")
    return value


def _timezone(key: str, value: Any) -> str:
    name = _string(key, value)
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ConfigError(
            f"'{key}': '{name}' is not a known IANA time zone (e.g. 'Europe/London')"
        ) from None
    return name


def _origins(key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise ConfigError(f"'{key}' must be a list of origins such as 'https://example.org'")
    origins: list[str] = []
    for entry in value:
        if not isinstance(entry, str) or check_uri(entry, ("http", "https", *STREAM_SCHEMES)):
            raise ConfigError(
                f"'{key}': {entry!r} is not an origin; write e.g. 'https://example.org'"
            )
        parts = urlsplit(entry)
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise ConfigError(f"'{key}': {entry!r} is not an origin (no path, just scheme://host)")
        origins.append(origin_of(entry))
    return tuple(origins)


_GROUP_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,199}$")


def _groups(key: str, value: Any) -> tuple[str, ...]:
    """Group names for the scheduler (server.scheduler.fleetapi: the same grammar)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or len(value) > 32:
        raise ConfigError(f"'{key}' must be a list of at most 32 group names")
    for entry in value:
        if not isinstance(entry, str) or not _GROUP_NAME.match(entry):
            raise ConfigError(
                f"'{key}': {entry!r} is not a group name (1 to 200 letters, digits, '.', '_' "
                "or '-', not starting with '.' or '-')"
            )
    return tuple(sorted(set(value)))


_HOST_NAME = re.compile(
    r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}"
    r"[A-Za-z0-9])?)*\.?|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$"
)


def _hosts(key: str, value: Any) -> tuple[str, ...]:
    """``[listen] hosts``: names (or ``[IPv6]``), each with an optional ``:port``."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or len(value) > 32:
        raise ConfigError(f"'{key}' must be a list of at most 32 host names")
    for entry in value:
        if not isinstance(entry, str) or not _HOST_NAME.match(entry) or len(entry) > 260:
            raise ConfigError(
                f"'{key}': {entry!r} is not a host name, IP address or [IPv6 address], with an"
                ' optional \':port\' (e.g. "signage-3.lan" or "signage-3.lan:8443")'
            )
    return tuple(value)


def _play_log_rows(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100_000_000:
        raise ConfigError(f"'{key}' must be a number of plays from 1 to 100000000")
    return value


def _url(key: str, value: Any) -> str:
    text = _string(key, value)
    problem = check_uri(text, ("http", "https"))
    if problem:
        raise ConfigError(f"'{key}' {problem}")
    return text.rstrip("/")


def _location(key: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ConfigError(f"'{key}' must be a table with latitude and longitude")
    problems = _unknown_keys(key, value, {"latitude", "longitude"})
    cleaned: dict[str, str] = {}
    for axis in ("latitude", "longitude"):
        text = _norm(value).get(axis)
        if not isinstance(text, str):
            problems.append(f"'{key}.{axis}' is required, as a string such as 'N54.0104'")
            continue
        try:
            parse_coordinate(text, axis)
        except ValueError as error:
            problems.append(f"'{key}.{axis}': {error}")
            continue
        cleaned[axis] = text
    if problems:
        raise ConfigError(*problems)
    return cleaned


def _screen(key: str, value: Any) -> ScreenConfig:
    if not isinstance(value, dict):
        raise ConfigError(f"'{key}' must be a table")
    table = _norm(value)
    problems = _unknown_keys(key, table, SCREEN_KEYS)
    screen, found = parse_screen(key, table)
    problems.extend(found)
    if screen is None or problems:
        raise ConfigError(*problems)
    return screen


def _norm(table: dict[str, Any]) -> dict[str, Any]:
    return {str(k).replace("-", "_"): v for k, v in table.items()}


def _unknown_keys(prefix: str, table: dict[str, Any], known: set[str]) -> list[str]:
    """A problem for every key of ``table`` not in ``known``, with the key meant when one is
    close (difflib: 'rotaton' -> 'rotation')."""
    problems = []
    for key in _norm(table):
        if key not in known:
            name = f"{prefix}.{key}" if prefix else key
            problems.append(f"unknown key '{name}'{_did_you_mean(key, known, prefix)}")
    return problems


def _did_you_mean(key: str, known: set[str], prefix: str) -> str:
    if not prefix:
        for section, keys in _SECTION_KEYS.items():
            if key in keys:
                return f"; did you mean '{key}' in [{section}]?"
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.7)
    if close:
        return f"; did you mean '{f'{prefix}.' if prefix else ''}{close[0]}'?"
    if not prefix:
        # A key of a section written at the top (rotation = 90 without [screen]).
        for section, keys in _SECTION_KEYS.items():
            close = difflib.get_close_matches(key, sorted(keys), n=1, cutoff=0.8)
            if close:
                return f"; did you mean '{close[0]}' in [{section}]?"
    return ""


def _check(problems: list[str], parse: Callable[[str, Any], Any], key: str, value: Any) -> Any:
    """``parse(key, value)``, its problems added to ``problems`` (None then)."""
    try:
        return parse(key, value)
    except ConfigError as error:
        problems.extend(error.problems)
        return None


def _section(parse: Callable[[dict[str, Any]], Any]) -> Callable[[str, Any], Any]:
    """A section owned by another module: its parser raises ValueError("key: message"). Unknown
    keys are all reported here first, with the key meant."""

    def check(key: str, value: Any) -> Any:
        if not isinstance(value, dict):
            raise ConfigError(f"'{key}' must be a table")
        table = _norm(value)
        problems = _unknown_keys(key, table, _SECTION_KEYS[key])
        try:
            parsed = parse({name: table[name] for name in table if name in _SECTION_KEYS[key]})
        except ValueError as error:
            problems.append(f"section '{key}': {error}")
        if problems:
            raise ConfigError(*problems)
        return parsed

    return check


# The keys of each section (sections of other modules: player/power.py, player/clocksanity.py).
_SECTION_KEYS: dict[str, set[str]] = {
    "screen": SCREEN_KEYS,
    "listen": {"host", "port", "tls", "tls_cert", "tls_key", "hosts"},
    "location": {"latitude", "longitude"},
    "power": {"on", "off", "days", "methods", "cec_device"},
    "clock": {"require_ntp"},
    "cache": {"max_size", "revalidate"},  # player/cache.py
}


_TOP: dict[str, Callable[[str, Any], Any]] = {
    "name": _string,
    "timezone": _timezone,
    "accept_cds": _bool,
    "allowed_origins": _origins,
    "api_token": _string,
    "scheduler_token": _string,
    "protect_reads": _bool,
    "public_url": _url,
    "data_dir": _string,
    "location": _location,
    "screen": _screen,
    "power": _section(parse_power_config),
    "clock": _section(parse_clock_config),
    "cache": _section(parse_cache_config),  # max-size = "2 GiB", revalidate = "15 minutes"
    "schedule_url": _url,
    "register_url": _url,
    "groups": _groups,  # groups = ["lobby"]: declared to the scheduler
    "play_log_rows": _play_log_rows,
}
# Config keys with another name than their field: schedule = URL, register (or scheduler) = URL.
_KEY_FIELDS = {"schedule": "schedule_url", "register": "register_url", "scheduler": "register_url"}
_KNOWN_TOP = ({*_TOP} - {"schedule_url", "register_url"}) | {*_KEY_FIELDS, "listen"}


def load_config(
    path: Path | None,
    *,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
) -> DisplayConfig:
    """Read the file (if any), then the environment, then ``overrides`` (flags, None = unset)."""
    env = dict(os.environ) if environ is None else environ
    if path is None and env.get("PDN_CONFIG"):
        path = Path(env["PDN_CONFIG"])
    table: dict[str, Any] = {}
    text = ""
    if path is not None:
        try:
            with path.open("rb") as handle:
                raw = handle.read()
            text = raw.decode("utf-8", errors="replace")
            table = tomllib.loads(raw.decode("utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"{path}: no such configuration file") from None
        except OSError as error:
            raise ConfigError(f"{path}: cannot read it ({error.strerror})") from None
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(f"{path}: not valid TOML: {error}") from None
        except UnicodeDecodeError as error:
            raise ConfigError(f"{path}: not UTF-8 text ({error.reason})") from None
    config, problems = _build(_norm(table))
    problems = [f"{_where(path, text, problem)}{problem}" for problem in problems]
    config.source = path
    token = env.get("PDN_API_TOKEN")
    if token:
        config.api_token = token
    enrolment = env.get("PDN_SCHEDULER_TOKEN")
    if enrolment:
        config.scheduler_token = enrolment
    checks: dict[str, Callable[[str, Any], Any]] = {
        "port": _port,
        "timezone": _timezone,
        "public_url": _url,
        "name": _string,
        "host": _string,
        "schedule_url": _url,
        "register_url": _url,
    }
    flags = {"schedule_url": "--schedule", "register_url": "--register"}
    for key, given in (overrides or {}).items():
        if given is None:
            continue
        flag = flags.get(key, "--" + key.replace("_", "-"))
        try:
            cleaned = checks[key](flag, given) if key in checks else given
        except ConfigError as error:
            problems.extend(error.problems)
            continue
        setattr(config, key, Path(cleaned) if key == "data_dir" else cleaned)
    if (
        config.register_url
        and not config.location
        and not any("location" in problem for problem in problems)
    ):
        problems.append(
            f"registering with the scheduler {config.register_url} ('register' or --register) "
            "needs the display's location: add a [location] table with latitude and longitude"
            f"{f' to {path}' if path is not None else ' to the config file (--config FILE)'}"
        )
    if problems:
        raise ConfigError(*problems)
    return config


_WALL_LINE = re.compile(r"^\s*(?:\[\s*screen\s*\.\s*wall\s*\]|wall\s*=)")


def _where(path: Path | None, text: str, problem: str) -> str:
    """``FILE: ``, or ``FILE:LINE: `` for a problem of ``[screen] wall`` (its line in the file:
    the table, or its ``[screen.wall]`` header)."""
    if path is None:
        return ""
    if "screen.wall" in problem:
        section = ""
        for number, line in enumerate(text.splitlines(), start=1):
            header = re.match(r"^\s*\[([^\]]+)\]", line)
            if header:
                section = header.group(1).strip()
            if _WALL_LINE.match(line) and (section == "screen" or "wall" in section):
                return f"{path}:{number}: "
    return f"{path}: "


def _build(table: dict[str, Any]) -> tuple[DisplayConfig, list[str]]:
    """The config from the file's table, and every problem found in it."""
    config = DisplayConfig(timezone=system_timezone_name(), data_dir=default_data_dir())
    problems: list[str] = []
    if "register" in table and "scheduler" in table:
        problems.append("'register' and 'scheduler' are the same setting: keep one")
    for key, value in table.items():
        if key == "listen":
            if not isinstance(value, dict):
                problems.append("'listen' must be a table with host and port")
                continue
            listen = _norm(value)
            problems.extend(_unknown_keys("listen", listen, _SECTION_KEYS["listen"]))
            if "tls" in listen:
                tls = _check(problems, _bool, "listen.tls", listen["tls"])
                config.tls = bool(tls)
            for name in ("tls_cert", "tls_key"):
                if name in listen:
                    flag = f"listen.{name.replace('_', '-')}"
                    path = _check(problems, _string, flag, listen[name])
                    if path is not None:
                        setattr(config, name, Path(path))
            if (config.tls_cert is None) != (config.tls_key is None):
                problems.append("'listen.tls-cert' and 'listen.tls-key' go together: give both")
            if "hosts" in listen:
                names = _check(problems, _hosts, "listen.hosts", listen["hosts"])
                config.listen_hosts = names if names is not None else ()
            if "host" in listen:
                host = _check(problems, _string, "listen.host", listen["host"])
                config.host = host if host is not None else config.host
            if "port" in listen:
                port = _check(problems, _port, "listen.port", listen["port"])
                config.port = port if port is not None else config.port
        elif key in _KEY_FIELDS or (key in _TOP and key not in _KEY_FIELDS.values()):
            target = _KEY_FIELDS.get(key, key)
            cleaned = _check(problems, _TOP[target], key, value)
            if cleaned is not None:
                setattr(config, target, Path(cleaned) if key == "data_dir" else cleaned)
        else:
            problems.extend(_unknown_keys("", {key: value}, _KNOWN_TOP))
    return config, problems
