"""The one redactor: every secret in play, in every form, out of everything displayed or persisted.

Secrets in play:

* the value of every environment variable whose name looks secret (``*_KEY``,
  ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD``, ``*_CREDENTIALS``, ...), as it is at each call;
* every value registered with `add_secret` — each prompt driver registers its own API
  key, whatever the variable holding it is called;
* the user-info and secret-named query parameters (``key``, ``token``, ``secret``,
  ``sig``, ``password``, ...) of every URL registered with `add_url` (a driver's base URL).

Each secret (8 characters or more) is found raw and in the forms it takes on its way
out: base64 (standard and URL-safe, at any offset inside a longer encoded text, so
``Authorization: Basic b64(user:password)`` and ``b64("Bearer KEY")`` are caught),
URL-encoded, JSON-escaped (once and twice) and repr-escaped. Independently of any
registry, `redact` masks URL user-info (``https://user:PASS@host``), secret-named
query parameters, and strings shaped like well-known provider keys (``sk-…``,
``AIza…``, ``gsk_…``, ``xai-…``). Every match becomes `MASK`.

`redact` works on text; `redact_data` on JSON-like data (dicts, lists, strings),
also masking the values of credential fields (``authorization``, ``api_key``, ...).
"""

from __future__ import annotations

import base64
import json
import os
import re
import threading
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qsl, quote, quote_plus, unquote, urlsplit

#: What every secret becomes.
MASK = "[redacted]"
#: Shorter values are not treated as secrets (placeholders such as ``ollama`` or ``EMPTY``).
MIN_SECRET_LENGTH = 8

#: Environment variables whose values are secrets.
SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|CREDENTIALS?|AUTH)$", re.I)
#: Query parameters whose values are secrets (``?key=…``, ``&access_token=…``, ``&sig=…``).
_SECRET_PARAM = r"(?:api[-_]?key|key|[a-z_]*token|secret|[a-z_]*sig|signature|password|passwd|pwd|auth|code)"
SECRET_PARAM = re.compile(rf"^{_SECRET_PARAM}$", re.I)
#: Fields of structured data whose values are credentials (headers, config dicts).
SECRET_FIELDS = frozenset({"authorization", "proxy-authorization", "api_key", "api-key", "apikey", "x-api-key",
                           "x-goog-api-key", "password", "client_secret"})

_KEY_SHAPED = re.compile(
    r"\b(?:sk-[A-Za-z0-9_\-*]{20,}|AIza[0-9A-Za-z_\-]{30,}|gsk_[A-Za-z0-9]{20,}|xai-[A-Za-z0-9]{20,})"
)
_KEY_PREFIXES = ("sk-", "AIza", "gsk_", "xai-")
_URL_USERINFO = re.compile(r"(?<=://)[^/@\s\"'<>]+(?=@)")
# A value ends where the URL does: ``)`` too, so "(http://h/x?key=K)" keeps its closing parenthesis
# (a key holding one is sent percent-encoded).
_URL_PARAM = re.compile(rf"([?&]{_SECRET_PARAM}=)[^&#\s\"'<>)]+", re.I)

_lock = threading.Lock()
_registered: set[str] = set()


def add_secret(value: str | None) -> None:
    """Treat `value` (stripped; ignored when shorter than `MIN_SECRET_LENGTH`) as a secret from now on."""
    value = (value or "").strip()
    if len(value) >= MIN_SECRET_LENGTH:
        with _lock:
            _registered.add(value)


def add_url(url: str | None) -> None:
    """Register the credentials in `url`: its user-info (the password, and ``user:password``
    as HTTP Basic auth sends it) and the values of its secret-named query parameters."""
    if not url:
        return
    try:
        parts = urlsplit(url)
    except ValueError:
        return
    if parts.password:
        add_secret(unquote(parts.password))
        basic = f"{unquote(parts.username or '')}:{unquote(parts.password)}"
        add_secret(basic)
        add_secret(base64.b64encode(basic.encode()).decode())  # the Basic auth header's value, itself echoed
    elif parts.username:
        add_secret(unquote(parts.username))
    for name, value in parse_qsl(parts.query, keep_blank_values=False):
        if SECRET_PARAM.match(name):
            add_secret(value)


#: (the environment as last read, its secrets): reading and matching every variable costs about
#: 0.25 ms, comparing the environment with the copy about 1 µs (every driver turn redacts its URL).
_env_seen: tuple[dict[Any, Any] | None, tuple[str, ...]] = (None, ())


def env_secrets() -> list[str]:
    """The values of secret-named environment variables (8 characters or more), as they are now."""
    global _env_seen
    data = getattr(os.environ, "_data", None)  # CPython's mapping behind os.environ (bytes on POSIX)
    seen, values = _env_seen
    if data is None or seen != data:
        values = tuple(
            v.strip() for k, v in os.environ.items() if SECRET_ENV.search(k) and len(v.strip()) >= MIN_SECRET_LENGTH
        )
        _env_seen = (dict(data) if data is not None else None, values)
    return list(values)


def secrets() -> frozenset[str]:
    """Every secret in play now (registered and from the environment)."""
    with _lock:
        return frozenset(_registered) | frozenset(env_secrets())


def _b64_cores(data: bytes) -> set[str]:
    """The parts of base64 text that `data` fixes wherever it sits in a longer encoded input:
    for each of the three alignments, the characters whose 6 bits all come from `data`."""
    cores = set()
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + data).decode()
        first = -(-8 * shift // 6)  # characters touching the padding bytes
        last = (8 * (shift + len(data))) // 6  # characters wholly inside `data`
        core = encoded[first:last]
        if len(core) >= MIN_SECRET_LENGTH:
            cores.add(core)
            cores.add(core.replace("+", "-").replace("/", "_"))
    return cores


def secret_forms(secret: str) -> set[str]:
    """`secret` as it may appear in output: raw, base64, URL-encoded, JSON- and repr-escaped."""
    escaped_json = json.dumps(secret)[1:-1]
    forms = {
        secret,
        quote(secret, safe=""),
        quote_plus(secret),
        escaped_json,
        json.dumps(escaped_json)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        repr(secret)[1:-1],
    }
    forms |= _b64_cores(secret.encode())
    return {f for f in forms if len(f) >= MIN_SECRET_LENGTH}


@lru_cache(maxsize=8)
def _forms(values: frozenset[str]) -> tuple[str, ...]:
    """Every form of `values`, longest first (a form inside a longer one is replaced with it)."""
    return tuple(sorted({form for value in values for form in secret_forms(value)}, key=len, reverse=True))


def redact(text: str, forms: tuple[str, ...] | None = None) -> str:
    """`text` with every secret in play, in every form, and any URL credentials replaced by `MASK`.
    `forms`: the forms to look for (`current_forms()`), when a caller redacting many texts has them.

    Cost: one substring search per form, and a regular expression only where its cheap
    marker occurs (``://``, ``=``, a key prefix): about 20 ms per MB with ten secrets.
    """
    if not text:
        return text
    for form in _forms(secrets()) if forms is None else forms:
        if form in text:
            text = text.replace(form, MASK)
    if "://" in text:
        text = _URL_USERINFO.sub(MASK, text)
    if "=" in text:
        text = _URL_PARAM.sub(rf"\g<1>{MASK}", text)
    if any(prefix in text for prefix in _KEY_PREFIXES):
        text = _KEY_SHAPED.sub(MASK, text)
    return text


#: How far past a cut `redact_head` redacts: a secret that starts before the cut is found whole.
_QUOTE_SLACK = 1024


def redact_head(text: str, limit: int = 200) -> str:
    """The first `limit` characters of `text`, redacted before the cut (`redact`): a secret
    across the cut is masked whole, never shown in part."""
    return redact(text[: limit + _QUOTE_SLACK])[:limit]


def current_forms() -> tuple[str, ...]:
    """Every form of every secret in play now (reading the environment costs about 1 ms: a caller
    redacting many texts at once asks once and passes the result to `redact` / `redact_data`)."""
    return _forms(secrets())


def redact_data(value: Any, forms: tuple[str, ...] | None = None) -> Any:
    """JSON-like `value` (dicts, lists, tuples, strings; other values as they are) with `redact`
    applied to every string and the values of credential fields (`SECRET_FIELDS`) masked.
    Ordinary data keeps its shape: a tool argument named ``key`` is data, not a credential.
    The secrets are read once per call, not once per string."""
    forms = current_forms() if forms is None else forms
    if isinstance(value, str):
        return redact(value, forms)
    if isinstance(value, dict):
        return {
            k: MASK if isinstance(k, str) and k.lower() in SECRET_FIELDS and v else redact_data(v, forms)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact_data(v, forms) for v in value]
    return value


_CREDENTIAL_KEY = re.compile('"(?:' + "|".join(re.escape(f) for f in sorted(SECRET_FIELDS)) + ')"', re.I)


@lru_cache(maxsize=8)
def _json_forms(forms: tuple[str, ...]) -> tuple[str, ...]:
    """`forms` and each as it appears inside a JSON string (escaped character by character)."""
    return tuple(dict.fromkeys([*forms, *(json.dumps(f, ensure_ascii=False)[1:-1] for f in forms)]))


def redact_json(value: Any, forms: tuple[str, ...] | None = None) -> str:
    """``json.dumps(redact_data(value), ensure_ascii=False, default=str)``, the same text, at the
    cost of one dump and a scan of its text when there is nothing to redact (most data): JSON
    escapes character by character, so whatever `redact_data` would change in a string (a form
    of a secret, URL credentials, a key-shaped word) or a credential field's name shows in the text."""
    forms = current_forms() if forms is None else forms
    text = json.dumps(value, ensure_ascii=False, default=str)
    if (
        any(form in text for form in _json_forms(forms))
        or ("://" in text and _URL_USERINFO.search(text))
        or ("=" in text and _URL_PARAM.search(text))
        or any(prefix in text for prefix in _KEY_PREFIXES)
        or _CREDENTIAL_KEY.search(text)
    ):
        return json.dumps(redact_data(value, forms), ensure_ascii=False, default=str)
    return text


class StreamRedactor:
    """`redact` for text that arrives in pieces (a terminal transcript, a live view).

    A secret never holds whitespace, so text is released up to its last whitespace, redacted;
    the word still arriving is held back until it ends (or grows past `max_word` characters,
    the longest form worth waiting for). Cost per piece: the piece plus the held-back word.
    """

    __slots__ = ("_pending", "max_word")

    def __init__(self, max_word: int = 4096) -> None:
        self._pending = ""
        self.max_word = max_word

    def feed(self, text: str) -> str:
        """The part of everything fed so far that can be shown now, redacted."""
        text = self._pending + text
        cut = max(text.rfind(" "), text.rfind("\n"), text.rfind("\t")) + 1
        if len(text) - cut > self.max_word:
            cut = len(text) - self.max_word // 2
        self._pending = text[cut:]
        return redact(text[:cut])

    def flush(self) -> str:
        """The held-back rest, redacted."""
        text, self._pending = self._pending, ""
        return redact(text)
