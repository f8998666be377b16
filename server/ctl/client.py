"""How ``pdn ctl`` talks to a display or a scheduler: one request, carrying the token and pinned
to the certificate that ``pdn ctl pair`` kept for that display (``~/.config/pdn/ctl.toml``), and
its failures as :class:`CtlError`, with the exit code each means.

A token goes only to the origin (``scheme://host:port``) it was made for:

- a display's token, kept by pairing, to that display's origin;
- ``PDN_API_TOKEN`` (the scheduler's operator token, or a display's ``api_token``) to the origin
  of ``PDN_API_URL`` alone, where it wins over a kept token. Bound to another origin, it is not
  sent (a 401 then says so); set with no ``PDN_API_URL``, every command that would send it is
  refused (exit 2) with a message saying what to set;
- nothing at all to a display's ``/x/pair``: pairing is done with the code.

Every ``pdn ctl`` module builds on this one (``server.ctl.cli``, ``server.ctl.pair``,
``server.ctl.fleet``), and this one on none of them: the commands never import each
other's helpers, so they make no import circle.
"""

from __future__ import annotations

import contextlib
import json
import os
import tomllib
from pathlib import Path
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

import requests

from server.platform import exitcodes
from server.platform.atomicfile import write_atomically
from server.platform.pins import PinningAdapter

# 0, 2 and 130 as every pdn command has them (server.platform.exitcodes); 1, 3 and 4 are ctl's own.
EXIT_OK = exitcodes.EXIT_OK
EXIT_REFUSED = 1
EXIT_USAGE = exitcodes.EXIT_USAGE
EXIT_UNREACHABLE = 3
EXIT_UNEXPECTED = 4

CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 15.0

_T = TypeVar("_T")


class Readable(Protocol):
    """A request body read as it is sent (a file, or one that counts what went)."""

    def read(self, amount: int = -1, /) -> bytes: ...


class CtlError(Exception):
    """A failure to report in one line, with the exit code it means."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# -- what pairing kept: ~/.config/pdn/ctl.toml ------------------------------------------------


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "pdn" / "ctl.toml"


def origin(url: str) -> str:
    """``scheme://host:port`` of a display URL (the key of its table), lower case."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or (443 if scheme == "https" else 80)
    host = (parts.hostname or "").lower()
    return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"


def load() -> dict[str, dict[str, Any]]:
    """The paired displays by origin ({} when nothing is paired yet); ValueError if unreadable."""
    path = config_path()
    try:
        with path.open("rb") as handle:
            table = tomllib.load(handle)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ValueError(f"cannot read {path}: {error}") from None
    displays = table.get("displays", {})
    return {str(k): dict(v) for k, v in displays.items() if isinstance(v, dict)}


def save(displays: dict[str, dict[str, Any]]) -> Path:
    """Write the paired displays (mode 0600: the file holds tokens)."""
    lines = ["# pdn ctl: displays this user paired with (pdn ctl pair). Keep it private.", ""]
    for key in sorted(displays):
        lines.append(f"[displays.{json.dumps(key)}]")
        # A JSON string with ASCII escapes is a TOML basic string.
        lines += [f"{name} = {json.dumps(str(value))}" for name, value in displays[key].items()]
        lines.append("")
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_atomically(path, "\n".join(lines).encode())
    return path


def _paired(url: str, field: str) -> str | None:
    """``field`` of what pairing kept for the display at ``url``, or None (an unreadable file:
    None)."""
    try:
        entry = load().get(origin(url))
    except ValueError:
        return None
    found = entry.get(field) if entry else None
    return found if isinstance(found, str) else None


def token_for(url: str) -> str | None:
    """The token paired with the display at ``url``, or None."""
    return _paired(url, "token")


def pinned_fingerprint(url: str) -> str | None:
    """The ``sha256:...`` pinned for the display at ``url``, or None."""
    return _paired(url, "tls-fingerprint")


def session_for(url: str, pin: str | None = None) -> requests.Session:
    """A session for requests to ``url``: pinned to ``pin`` or to what pairing kept."""
    session = requests.Session()
    pin = pin or pinned_fingerprint(url)
    if pin and urlsplit(url).scheme == "https":
        session.mount("https://", PinningAdapter(lambda _url: pin))  # this display's session
    return session


# -- HTTP ------------------------------------------------------------------------------------


def base_url(url: str, what: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CtlError(EXIT_USAGE, f"{what} must be an http:// or https:// URL, not {url!r}")
    return url.rstrip("/")


TOKEN_VARIABLE = "PDN_API_TOKEN"
BINDING_VARIABLE = "PDN_API_URL"


def _env(name: str) -> str | None:
    return os.environ.get(name, "").strip() or None


def bound_origin() -> str | None:
    """The origin ``PDN_API_TOKEN`` belongs to (``PDN_API_URL``), or None when unset."""
    bound = _env(BINDING_VARIABLE)
    if bound is None:
        return None
    parts = urlsplit(bound)
    try:
        if parts.scheme in ("http", "https") and parts.hostname:
            return origin(bound)
    except ValueError:
        pass
    raise CtlError(
        EXIT_USAGE,
        f"{BINDING_VARIABLE}={bound!r} is not an http:// or https:// URL; set it to the URL of"
        f" the scheduler (or display) {TOKEN_VARIABLE} belongs to",
    )


def is_pairing(url: str) -> bool:
    """True for a display's pairing endpoint (``.../x/pair``), which takes no token."""
    return urlsplit(url).path.rstrip("/").endswith("/x/pair")


def bearer_for(url: str) -> str | None:
    """The token to send to ``url``: ``PDN_API_TOKEN`` where ``PDN_API_URL`` binds it, else
    the token kept for that origin, else none; CtlError when ``PDN_API_TOKEN`` is set but
    bound to nothing (where it belongs is not known, so it is sent nowhere)."""
    if is_pairing(url):
        return None
    token = _env(TOKEN_VARIABLE)
    bound = bound_origin() if token else None
    if token and bound is not None and origin(url) == bound:
        return token
    kept = token_for(url)
    if kept or not token or bound is not None:
        return kept
    raise CtlError(
        EXIT_USAGE,
        f"{TOKEN_VARIABLE} is set, but pdn ctl sends it only to the URL it belongs to: set"
        f" {BINDING_VARIABLE} to that scheduler's (or display's) URL, e.g. export"
        f" {BINDING_VARIABLE}={origin(url)} if it is this one's; or unset {TOKEN_VARIABLE}"
        " (a display paired with 'pdn ctl pair' needs no variable)",
    )


def headers_for(
    url: str, *, content_type: str | None = None, accept: str = "application/json"
) -> dict[str, str]:
    headers = {"Accept": accept}
    if content_type:
        headers["Content-Type"] = content_type
    # Changes need a token; reads too, on a display that protects them.
    token = bearer_for(url)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def _unauthorized_hint(url: str, detail: str) -> str:
    """What to do about a 401 from ``url``."""
    token = _env(TOKEN_VARIABLE)
    try:
        bound = bound_origin() if token else None
    except CtlError:
        bound = None
    if token and bound is not None and bound != origin(url):
        return (
            f" ({TOKEN_VARIABLE} was not sent: it belongs to {bound} ({BINDING_VARIABLE}),"
            f" not {origin(url)})"
        )
    if "scheduler" in detail:
        return (
            f" (set {TOKEN_VARIABLE} to the scheduler's operator token and {BINDING_VARIABLE}"
            " to its URL)"
        )
    return (
        f" (pair with 'pdn ctl pair', or set {TOKEN_VARIABLE} to the display's token and"
        f" {BINDING_VARIABLE} to its URL)"
    )


def call(
    method: str,
    url: str,
    *,
    body: bytes | Readable | None = None,
    content_type: str | None = None,
    accept: str = "application/json",
    pin: str | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = READ_TIMEOUT,
) -> requests.Response:
    """One request; to a display paired over HTTPS, pinned to its certificate (``pin``, or the
    one ``pdn ctl pair`` kept). ``body`` may be a file, streamed; ``headers`` go with the
    usual ones; ``timeout``: the seconds to wait for the answer."""
    try:
        with session_for(url, pin) as session:
            return session.request(
                method,
                url,
                data=body,
                headers={
                    **(headers or {}),
                    **headers_for(url, content_type=content_type, accept=accept),
                },
                timeout=(CONNECT_TIMEOUT, timeout),
                allow_redirects=False,
            )
    except requests.exceptions.SSLError as error:
        expected = pin or pinned_fingerprint(url)
        if expected and "ingerprint" in str(error):
            raise CtlError(
                EXIT_REFUSED,
                f"{url}: the display's certificate is not the one pinned when it was paired"
                f" ({expected}); if it was replaced on purpose, pair again (pdn ctl pair)",
            ) from None
        raise CtlError(
            EXIT_UNREACHABLE, f"cannot reach {url} over TLS: {reason_of(error)}"
        ) from None
    except requests.ConnectionError as error:
        raise CtlError(
            EXIT_UNREACHABLE,
            f"cannot reach {url}: {reason_of(error)}. Is it running, and is the address right?",
        ) from None
    except requests.Timeout:
        raise CtlError(EXIT_UNREACHABLE, f"{url} did not answer in time") from None
    except requests.RequestException as error:
        raise CtlError(EXIT_UNREACHABLE, f"cannot reach {url}: {error}") from None


def reason_of(error: Exception) -> str:
    text = str(error)
    for marker in (
        "Connection refused",
        "Name or service not known",
        "No route to host",
        "timed out",
        "Network is unreachable",
        "Temporary failure in name resolution",
    ):
        if marker in text:
            return marker.lower()
    return text if len(text) < 200 else text[:200] + "..."


def json_answer(response: requests.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        raise CtlError(
            EXIT_UNEXPECTED,
            f"{response.url} answered {response.status_code} without JSON; "
            "is it a pdn display or scheduler?",
        ) from None


def check(response: requests.Response) -> Any:
    """The JSON answer of a 2xx; a CtlError for anything else."""
    if response.status_code >= 400:
        answer: Any = None
        with contextlib.suppress(ValueError):
            answer = response.json()
        message = answer.get("message") if isinstance(answer, dict) else None
        detail = message or response.reason
        code = EXIT_REFUSED if response.status_code < 500 else EXIT_UNEXPECTED
        if response.status_code == 401:
            detail += _unauthorized_hint(response.url, detail)
        raise CtlError(code, f"{response.status_code}: {detail}")
    return json_answer(response)


def get_json(base: str, path: str, kind: type[_T]) -> _T:
    """``GET base + path``, checked (:func:`check`): its JSON answer when it is a ``kind``
    (a list, a dict), else a CtlError saying what came."""
    answer = check(call("GET", f"{base}{path}"))
    if not isinstance(answer, kind):
        raise CtlError(EXIT_UNEXPECTED, f"unexpected answer from {base}: {answer!r}")
    return answer


def print_json(value: Any) -> None:
    """What ``--json`` prints: the answer as it came, indented, non-ASCII kept."""
    print(json.dumps(value, indent=2, ensure_ascii=False))
