"""Record and replay raw HTTP exchanges (DESIGN.md, "Record and replay").

A cassette is a JSON-lines file, one exchange a line::

    {"provider": "openai", "model": "gpt-6-luna", "base_url": "https://api.openai.com/v1",
     "request": {"method": "POST", "url": "https://.../chat/completions", "body": {...}},
     "response": {"status": 200, "headers": {"content-type": "..."}, "body": "data: ...\\n\\n"}}

No request header is stored, so no ``Authorization`` header and no key; the
URL, bodies and the base URL pass through the one redactor (`core.redact`). Replay serves
the recorded bytes through an httpx2 transport, so the same driver code parses
the same bytes.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx2

from ..core import ConfigurationError, redact

#: Response headers worth keeping: the ones that change how we parse or retry.
KEPT_HEADERS = ("content-type", "retry-after", "retry-after-ms", "x-request-id")


def _canonical(body: bytes) -> str:
    try:
        return json.dumps(json.loads(body), sort_keys=True)
    except ValueError:
        return body.decode("utf-8", "replace")


class _TeeStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, done: Callable[[bytes], None]) -> None:
        self._inner, self._done, self._parts = inner, done, []  # type: list[bytes]

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._parts.append(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()
        self._done(b"".join(self._parts))


class RecordingTransport(httpx2.AsyncBaseTransport):
    """Sends requests through `inner` and appends each exchange to `path`.

    Secrets are redacted from the stored URL, bodies and base URL. An
    exchange is written when its response is closed, with the bytes read.
    """

    replays = False

    def __init__(self, path: str | Path, *, provider: str, model: str,
                 inner: httpx2.AsyncBaseTransport | None = None, base_url: str | None = None) -> None:
        self.path = Path(path)
        self.provider, self.model = provider, model
        self.base_url = redact(base_url) if base_url else None
        self._inner = inner or httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        response = await self._inner.handle_async_request(request)

        def write(content: bytes) -> None:
            try:
                request_body: Any = json.loads(redact(body.decode("utf-8", "replace")))
            except ValueError:
                request_body = redact(body.decode("utf-8", "replace"))
            entry = {
                "provider": self.provider,
                "model": self.model,
                "base_url": self.base_url,
                "request": {"method": request.method, "url": redact(str(request.url)), "body": request_body},
                "response": {
                    "status": response.status_code,
                    "headers": {k: response.headers[k] for k in KEPT_HEADERS if k in response.headers},
                    "body": redact(content.decode("utf-8", "replace")),
                },
            }
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(entry) + "\n")
            except OSError as exc:  # a full disk, a folder gone: the answer is kept, the cassette misses it
                warnings.warn(f"ipyagent: could not record to {self.path}: {exc}; the answer is kept, "
                              "the cassette misses this exchange", RuntimeWarning, stacklevel=1)

        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_TeeStream(response.stream, write),  # type: ignore[arg-type]
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def load_cassette(path: str | Path) -> list[dict[str, Any]]:
    """The exchanges of a cassette file.

    Raises:
        ConfigurationError: the file is missing, empty or not a cassette.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigurationError(
            f"cassette {str(path)!r} not found; record one with %provider PROVIDER:MODEL --record {path}"
        )
    entries = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            entry["request"], entry["response"]  # noqa: B018 - shape check
        except (ValueError, KeyError, TypeError):
            raise ConfigurationError(
                f"{path}:{n} is not a cassette line (a JSON object with request and response)"
            ) from None
        entries.append(entry)
    if not entries:
        raise ConfigurationError(f"cassette {str(path)!r} holds no exchanges")
    return entries


class _ReplayStream(httpx2.AsyncByteStream):
    def __init__(self, body: bytes, delay: float) -> None:
        self._body, self._delay = body, delay

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if not self._delay:
            yield self._body
            return
        # SSE events end with a blank line; NDJSON (Ollama) has one object a line.
        sep = b"\n\n" if b"\n\n" in self._body else b"\n"
        for piece in self._body.split(sep):
            yield piece + sep
            await asyncio.sleep(self._delay)


def _json(body: Any) -> Any:
    """A request body as JSON data (a recorded body is data already, or text), or None."""
    if isinstance(body, (bytes, str)):
        try:
            return json.loads(body)
        except ValueError:
            return None
    return body


def reasked_at(recorded: Any, current: Any) -> int | None:
    """Where `current` asks `recorded`'s question again after more conversation, or None.

    Both are JSON request bodies. They must be equal but for one list (the conversation:
    ``messages``, ``input`` or ``contents``), which in `current` is the recorded one with
    messages inserted before the recorded suffix that starts at a user message: what a
    cell sends when it is run again after later cells (or itself) added turns. Returns the
    length of the shared prefix (the longer, the closer the match).
    """
    if not isinstance(recorded, dict) or not isinstance(current, dict) or recorded.keys() != current.keys():
        return None
    differing = [k for k in recorded if recorded[k] != current[k]]
    if len(differing) != 1:
        return None
    old, new = recorded[differing[0]], current[differing[0]]
    if not isinstance(old, list) or not isinstance(new, list) or len(new) <= len(old):
        return None
    inserted = len(new) - len(old)
    for i in range(len(old) - 1, -1, -1):
        starts_turn = isinstance(old[i], dict) and old[i].get("role") == "user"
        if starts_turn and old[i:] == new[i + inserted :] and old[:i] == new[:i]:
            return i
    return None


class ReplayTransport(httpx2.AsyncBaseTransport):
    """Serves the exchanges of a cassette. A request matches an exchange with the
    same method, URL path and JSON body; recorded exchanges are used in order,
    and one already used may be served again.

    A request recorded nowhere that asks a recorded question again after more
    conversation (a cell run again: its prompt now follows the turns added since)
    is served that question's recorded reply (`reasked_at`), the one sharing the
    longest start of the conversation; so re-running a replayed cell gives the same
    answer, as it did the first time, with no key.

    Args:
        path: the cassette file.
        chunk_delay: seconds between SSE events served (0: all at once); a small
            delay lets a replay show streaming as it looked live. An exchange
            may set its own pace (``"chunk_delay"`` on its line), used instead
            whenever this is not 0.

    Raises (on a request): ConfigurationError naming the cassette when no
    recorded exchange matches.
    """

    replays = True

    def __init__(self, path: str | Path, *, chunk_delay: float = 0.0) -> None:
        self.path = Path(path)
        self.entries = load_cassette(path)
        self.chunk_delay = chunk_delay
        self._used: set[int] = set()

    def _key(self, method: str, url: str, body: Any) -> tuple[str, str, str]:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        return method.upper(), httpx2.URL(url).path, _canonical(raw)

    def _reasked(self, key: tuple[str, str, str], body: Any) -> list[int]:
        """The exchanges `body` asks again (`reasked_at`), those sharing the longest start first."""
        scored = []
        for i, entry in enumerate(self.entries):
            request = entry["request"]
            if (request["method"].upper(), httpx2.URL(request["url"]).path) != key[:2]:
                continue
            at = reasked_at(_json(request["body"]), body)
            if at is not None:
                scored.append((-at, i))
        return [i for _, i in sorted(scored)]

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        key = self._key(request.method, str(request.url), await request.aread())
        matches = [
            i
            for i, e in enumerate(self.entries)
            if self._key(e["request"]["method"], e["request"]["url"], e["request"]["body"]) == key
        ]
        if not matches:
            matches = self._reasked(key, _json(key[2]))[:1]
        if not matches:
            raise ConfigurationError(
                f"this request is not in the cassette {self.path.name} ({len(self.entries)} recorded exchanges): "
                "the prompt, options or the conversation before it differ from the recording (--new starts "
                "afresh); with a key, record it again with --record."
            )
        index = next((i for i in matches if i not in self._used), matches[-1])
        self._used.add(index)
        recorded = self.entries[index]["response"]
        delay = (self.entries[index].get("chunk_delay") or self.chunk_delay) if self.chunk_delay else 0.0
        return httpx2.Response(
            recorded["status"],
            headers=recorded.get("headers") or {},
            stream=_ReplayStream(recorded["body"].encode("utf-8"), delay),
        )
