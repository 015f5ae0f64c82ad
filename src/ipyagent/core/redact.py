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
query parameters, strings shaped like well-known keys (`KEY_FORMATS`: ``sk-…``,
``sk-ant-…``, ``AKIA…``, ``ghp_…``, ``github_pat_…``, ``xoxb-…``, ``AIza…``, ``glpat-…``,
JWTs, ...) and the token of ``Bearer …``. Every match becomes `MASK`.

`redact` works on text; `redact_data` on JSON-like data (dicts, lists, strings),
also masking the values of credential fields (``authorization``, ``api_key``, ...).

Context sent to a model (a cell template's values, ``--with``, ``--cells``, the last
error, tool results) passes `redact_context`: `redact`, and besides every value under a
secret-looking name (`secret_name`: ``api_key``, ``token``, ``password``, ``secret``,
``authorization``, ...), in a mapping (`mask_named`) or written in text (``"password":
"…"``, ``token=…``, a ``password: …`` line); it says how many values it masked.
"""

from __future__ import annotations

import base64
import json
import os
import re
import threading
from functools import lru_cache
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, quote, quote_plus, unquote, urlsplit

#: What every secret becomes.
MASK = "[redacted]"
#: Shorter values are not treated as secrets (placeholders such as ``ollama`` or ``EMPTY``).
MIN_SECRET_LENGTH = 8

#: Environment variables whose values are secrets: a name ending in one of these words, or holding
#: one as a part of its own (``GITHUB_TOKEN_RO``, ``DB_PASSWORD_PROD``).
SECRET_ENV = re.compile(
    r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|CREDENTIALS?|AUTH)$"
    r"|(?:^|_)(?:SECRET|TOKEN|PASSWORD|PASSWD|API_?KEY|PRIVATE_KEY|CREDENTIALS?)(?:_|$)",
    re.I,
)
#: Query parameters whose values are secrets (``?key=…``, ``&access_token=…``, ``&sig=…``).
_SECRET_PARAM = r"(?:api[-_]?key|key|[a-z_]*token|secret|[a-z_]*sig|signature|password|passwd|pwd|auth|code)"
SECRET_PARAM = re.compile(rf"^{_SECRET_PARAM}$", re.I)
#: Fields of structured data whose values are credentials (headers, config dicts).
SECRET_FIELDS = frozenset({"authorization", "proxy-authorization", "api_key", "api-key", "apikey", "x-api-key",
                           "x-goog-api-key", "password", "client_secret"})

#: Well-known key formats (masked wherever they appear), by issuer.
KEY_FORMATS = {
    "OpenAI, Anthropic (sk-ant-), DeepSeek, ...": r"sk-[A-Za-z0-9_\-*]{20,}",
    "Stripe": r"[sr]k_(?:live|test)_[A-Za-z0-9]{16,}",
    "Google": r"AIza[0-9A-Za-z_\-]{30,}",
    "Groq": r"gsk_[A-Za-z0-9]{20,}",
    "xAI": r"xai-[A-Za-z0-9]{20,}",
    "AWS access key id": r"(?:AKIA|ASIA)[0-9A-Z]{16}",
    "GitHub": r"gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}",
    "Slack": r"xox[abposr]-[A-Za-z0-9-]{10,}",
    "GitLab": r"glpat-[A-Za-z0-9_\-]{20,}",
    "Hugging Face": r"hf_[A-Za-z0-9]{30,}",
    "JWT": r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
}
_KEY_SHAPED = re.compile(r"\b(?:" + "|".join(KEY_FORMATS.values()) + ")")
#: What the formats start with: the regular expression runs only where one occurs.
_KEY_PREFIXES = (
    "sk-", "sk_", "rk_", "AIza", "gsk_", "xai-", "AKIA", "ASIA", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_",
    "xox", "glpat-", "hf_", "eyJ",
)
#: ``Bearer TOKEN`` (an Authorization header's value): the token, 16 characters or more with a digit.
_BEARER = re.compile(r"\b([Bb]earer|BEARER)(\s+)(?=[A-Za-z0-9._~+/-]*[0-9])[A-Za-z0-9._~+/-]{16,}=*")
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
    """The secrets the environment holds now (8 characters or more): the values of secret-named
    variables, and the password of a URL any variable holds (``DATABASE_URL=postgres://u:PASS@h/db``)."""
    global _env_seen
    data = getattr(os.environ, "_data", None)  # CPython's mapping behind os.environ (bytes on POSIX)
    seen, values = _env_seen
    if data is None or seen != data:
        found = [v.strip() for k, v in os.environ.items() if SECRET_ENV.search(k)]
        found += [password for v in os.environ.values() if "://" in v for password in _url_passwords(v)]
        values = tuple(dict.fromkeys(v for v in found if len(v) >= MIN_SECRET_LENGTH))
        _env_seen = (dict(data) if data is not None else None, values)
    return list(values)


def _url_passwords(text: str) -> list[str]:
    """The passwords of the URLs in `text` (``scheme://user:PASSWORD@host``), decoded."""
    found = []
    for userinfo in _URL_USERINFO.findall(text):
        _, colon, password = userinfo.partition(":")
        if colon and password:
            found.append(unquote(password))
    return found


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
    if "earer" in text or "EARER" in text:
        text = _BEARER.sub(rf"\g<1>\g<2>{MASK}", text)
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
#: `_CREDENTIAL_KEY`'s names as ASCII text holds them once lowered: a scan of plain substrings (the
#: regular expression, case-insensitive, tries every name at every character: most of a dump's cost).
_QUOTED_FIELDS = tuple(f'"{f}"' for f in sorted(SECRET_FIELDS))


def _credential_key(text: str) -> bool:
    """True when `text` (JSON) names a credential field (`SECRET_FIELDS`, any case) in quotes."""
    if text.isascii():  # lower() folds case as the expression does (beyond ASCII it may not)
        return any(map(text.lower().__contains__, _QUOTED_FIELDS))
    return _CREDENTIAL_KEY.search(text) is not None


@lru_cache(maxsize=8)
def _json_forms(forms: tuple[str, ...]) -> tuple[str, ...]:
    """`forms` and each as it appears inside a JSON string (escaped character by character)."""
    return tuple(dict.fromkeys([*forms, *(json.dumps(f, ensure_ascii=False)[1:-1] for f in forms)]))


#: ``json.dumps(value, ensure_ascii=False, default=str)``, without making an encoder per call.
_dump = json.JSONEncoder(ensure_ascii=False, default=str).encode


def _may_hold_secret(text: str, forms: tuple[str, ...]) -> bool:
    """True when JSON `text` shows something `redact_data` would change in the data it dumps: a
    form of a secret (`forms`), URL credentials, a key-shaped word, a credential field's name, a
    bearer token (JSON escapes character by character, so each shows in the text). Texts joined by
    line breaks (which JSON escapes) give True when any of them would."""
    return bool(
        any(map(text.__contains__, _json_forms(forms)))  # map, not a generator: no frame per form
        or ("://" in text and _URL_USERINFO.search(text))
        or ("=" in text and _URL_PARAM.search(text))
        or any(map(text.__contains__, _KEY_PREFIXES))
        or _credential_key(text)
        or (("earer" in text or "EARER" in text) and _BEARER.search(text))
    )


def redact_json(value: Any, forms: tuple[str, ...] | None = None) -> str:
    """``json.dumps(redact_data(value), ensure_ascii=False, default=str)``, the same text, at the
    cost of one dump and a scan of its text when there is nothing to redact (most data)."""
    forms = current_forms() if forms is None else forms
    text = _dump(value)
    if _may_hold_secret(text, forms):
        return _dump(redact_data(value, forms))
    return text


def redact_json_all(values: list[Any], forms: tuple[str, ...] | None = None) -> list[str | None]:
    """`redact_json` of each of `values` (None stays None: a JSON column left empty), the texts
    scanned once, together: one scan for a stored run's JSON fields, not one per field."""
    forms = current_forms() if forms is None else forms
    texts = [None if v is None else _dump(v) for v in values]
    if _may_hold_secret("\n".join(t for t in texts if t is not None), forms):
        return [None if v is None else redact_json(v, forms) for v in values]
    return texts


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


# -- context sent to a model ------------------------------------------------------------------

#: The words that make a name secret-looking (`secret_name`), at its end: ``OPENAI_API_KEY``,
#: ``db_password``, ``accessToken``, ``x-api-key``, ``Authorization``; not ``max_tokens`` nor ``key``.
_SECRET_WORDS = (r"(?:api[_-]?key|access[_-]?key|secret[_-]?key|private[_-]?key|client[_-]?secret|secret|token"
                 r"|password|passwd|passphrase|authorization|credentials?|cookie)")
#: A secret-named value written in text, quoted: ``"password": "…"``, ``api_key='…'``, ``TOKEN = "…"``;
#: unquoted after ``=`` with no space around it (environment files, logs, query strings, options); as a
#: line ``name: value`` (YAML, HTTP headers), a value that is no quote, flow or code.
_NAMED_QUOTED = (rf"(?<![\w-])([\"']?)[\w.-]*?{_SECRET_WORDS}\1\s*[:=]\s*[bru]?([\"'])"
                 r"(?P<value>(?:\\.|(?!\2)[^\\\n])+)\2")
_NAMED_BARE = (rf"(?<![\w-])[\w.-]*?{_SECRET_WORDS}=(?![\s\"'=]|\[redacted\])"
               r"(?P<value>(?:(?:Bearer|Basic|Token)\s+)?[^\s\"',;&)}\]]+)")
_NAMED_LINE = (rf"^[ \t]*(?:-[ \t]+)?[\"']?[\w.-]*?{_SECRET_WORDS}[\"']?[ \t]*:[ \t]+(?![\"'\[{{|>&*])"
               r"(?P<value>[^\n(]*?[^\s,(])[ \t]*$")


@lru_cache(maxsize=1)
def _named_rules() -> tuple[re.Pattern[str], re.Pattern[str], tuple[re.Pattern[str], ...]]:
    """(the secret name at a name's end, a secret word anywhere, the three rules of a value written
    under a secret name), compiled at the first use: ~3 ms that a first magic, which masks no
    context, does not spend."""
    name = re.compile(rf"(?:^|[_\-.]|(?<=[a-z])(?=[A-Z])){_SECRET_WORDS}$", re.I)
    rules = (re.compile(_NAMED_QUOTED, re.I), re.compile(_NAMED_BARE, re.I), re.compile(_NAMED_LINE, re.I | re.M))
    return name, re.compile(_SECRET_WORDS, re.I), rules


#: Containers `mask_named` walks at most (nodes), so a huge list is left to the text rules.
MASK_NODES = 10_000


@lru_cache(maxsize=4096)
def secret_name(name: str) -> bool:
    """True when `name` (a mapping key, a variable, an attribute) says its value is a credential:
    it ends in ``api_key``, ``access_key``, ``secret``, ``token``, ``password``, ``passphrase``,
    ``authorization``, ``credentials``, ``cookie`` ... after a separator, a case change or nothing."""
    return bool(_named_rules()[0].search(name))


def _masks(value: Any) -> bool:
    """A value under a secret name is masked when it is non-blank text (numbers and None stay)."""
    return isinstance(value, (str, bytes)) and bool(value.strip()) and value != MASK


def mask_named(value: Any) -> tuple[Any, int]:
    """(`value` with every secret-named entry of its mappings masked, how many were): mappings
    (``os.environ`` too) become dicts, lists and tuples keep their type, the rest is kept as it
    is. A value of more than `MASK_NODES` containers and items is returned unchanged (0)."""
    if not isinstance(value, (Mapping, list, tuple)):
        return value, 0
    try:
        return _masked(value, [MASK_NODES])
    except (OverflowError, RecursionError):
        return value, 0


def _masked(item: Any, budget: list[int]) -> tuple[Any, int]:
    """`mask_named`'s walk, at module level: a nested function that calls itself is a reference
    cycle, left to the garbage collector at every call (one a row of an evaluation)."""
    budget[0] -= 1
    if budget[0] < 0:
        raise OverflowError
    if isinstance(item, Mapping):
        out, count = {}, 0
        for key, inner in item.items():
            if isinstance(key, str) and secret_name(key) and _masks(inner):
                out[key], count = MASK, count + 1
            else:
                out[key], n = _masked(inner, budget)
                count += n
        return out, count
    if isinstance(item, (list, tuple)):
        pairs = [_masked(inner, budget) for inner in item]
        return type(item)(v for v, _ in pairs) if isinstance(item, tuple) else [v for v, _ in pairs], sum(
            n for _, n in pairs)
    return item, 0


def _mask_value(match: re.Match[str]) -> str:
    start, end = match.span("value")
    text = match.string
    return text[match.start():start] + MASK + text[end:match.end()]


def redact_context(text: str, forms: tuple[str, ...] | None = None) -> tuple[str, int]:
    """(`text` as a model may be sent it, how many values were masked): `redact`, then every value
    written under a secret-looking name (`secret_name`) quoted (``"password": "…"``), after ``=``
    (``token=…``) or on a ``name: value`` line. Cost: `redact`'s, and three regular-expression
    scans where a secret word occurs."""
    if not text:
        return text, 0
    before = text.count(MASK)
    text = redact(text, forms)
    _, word, rules = _named_rules()
    if word.search(text):  # the cheap test before the three rules
        for rule in rules:
            text = rule.sub(_mask_value, text)
    return text, text.count(MASK) - before

