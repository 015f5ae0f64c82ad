"""A scripted HTTP server on 127.0.0.1 for tests: serves recorded bytes as a real server would.

Each request takes the next `Reply` from the script (the last one repeats).
Bodies go out with chunked transfer encoding, piece by piece, so a test can
slow a stream down or cut it off mid-way, and the server notes when the client
hung up.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "providers"
#: Seconds a held reply waits for its release at most: a guard against a test that never releases it.
HOLD_LIMIT = 120


@dataclass
class Reply:
    """One scripted response. `pieces` are written one by one, `delay` seconds apart;
    `cut_after` closes the connection without finishing the body after that many pieces;
    `hold_after` stops after that many pieces (`held` is then set) until `release` is set,
    so a test can act while a stream is surely under way, with no sleep; `after`, when given,
    holds the whole reply (its status line too) until that event is set. `sent` is set, and
    `sent_at` (`time.monotonic()`) noted, once the body has been written to its end."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "text/event-stream"})
    pieces: list[bytes] = field(default_factory=list)
    delay: float = 0.0
    cut_after: int | None = None
    wait: float = 0.0  # seconds before the status line (a server thinking)
    hold_after: int | None = None
    # True: piece n goes out at start + n * delay (a schedule), so the body lasts its scripted
    # duration even when a loaded machine wakes the server late; False: `delay` after each write.
    paced: bool = False
    held: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    after: threading.Event | None = None
    sent: threading.Event = field(default_factory=threading.Event)
    sent_at: float | None = None

    @classmethod
    def sse_file(cls, path: Path, **kw: Any) -> "Reply":
        """A recorded raw SSE body, one event a piece."""
        raw = path.read_bytes()
        sep = b"\r\n\r\n" if b"\r\n\r\n" in raw else b"\n\n"
        pieces = [p + sep for p in raw.split(sep) if p.strip()]
        return cls(pieces=pieces, **kw)

    @classmethod
    def chunks_file(cls, path: Path, **kw: Any) -> "Reply":
        """A `*.chunks.jsonl` recording wrapped as `data:` lines (SOURCES.md)."""
        lines = [line for line in path.read_text().splitlines() if line.strip()]
        return cls(pieces=[f"data: {line}\n\n".encode() for line in lines] + [b"data: [DONE]\n\n"], **kw)

    @classmethod
    def error_file(cls, body_path: Path, http_path: Path | None = None, status: int | None = None) -> "Reply":
        """A recorded error body with the status and headers of its `.http.json` sidecar."""
        headers = {"Content-Type": "application/json"}
        if http_path and http_path.exists():
            meta = json.loads(http_path.read_text())
            status = status or meta["status"]
            for key, value in meta.get("headers", {}).items():
                if key.lower() in ("content-type", "retry-after", "retry-after-ms"):
                    headers[key] = value[0] if isinstance(value, list) else value
        return cls(status=status or 400, headers=headers, pieces=[body_path.read_bytes()])


class StubServer:
    """Run as a context manager; `url` is ``http://127.0.0.1:PORT``."""

    def __init__(self, *replies: Reply, responder: Any = None, respond: Any = None) -> None:
        """`responder(body) -> Reply`, when given, answers each request from its parsed JSON body;
        `respond(request) -> Reply` from the whole request (a dict: path, headers, body)."""
        self.replies = list(replies)
        self.responder = responder
        self.respond = respond
        self.requests: list[dict[str, Any]] = []
        self.request_times: list[float] = []
        self.hangups: list[float] = []
        self.pieces_sent = 0  # reply pieces written (a test can wait for a stream to be under way)
        self.completed: list[float] = []  # bodies written to the end
        self.connections = 0  # connections accepted
        self.closed_connections = 0  # connections the client (or we) closed
        self._served = 0
        self._lock = threading.Lock()
        #: Notified on each request, piece written, body written to the end and hang-up (`wait_for`).
        self._changed = threading.Condition(self._lock)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # each piece goes out when written, not after the client's delayed ACK

            def log_message(self, *args: Any) -> None:
                pass

            def handle(self) -> None:
                with server._lock:
                    server.connections += 1
                try:
                    super().handle()  # request after request until the connection closes
                finally:
                    with server._changed:
                        server.closed_connections += 1
                        server._changed.notify_all()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self._serve(self.rfile.read(length))

            def do_GET(self) -> None:  # model lists (GET /models, /api/tags)
                self._serve(None)

            def _serve(self, body: bytes | None) -> None:
                with server._lock:
                    try:
                        parsed: Any = json.loads(body) if body is not None else None
                    except ValueError:
                        parsed = body.decode()  # type: ignore[union-attr]
                    request = {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": parsed}
                    server.requests.append(request)
                    server.request_times.append(time.monotonic())
                    server._changed.notify_all()
                    scripted = not (server.responder or server.respond)
                    reply = server.replies[min(server._served, len(server.replies) - 1)] if scripted else None
                    server._served += 1
                if reply is None:
                    reply = server.respond(request) if server.respond else server.responder(parsed)
                if reply.after is not None:
                    reply.after.wait(HOLD_LIMIT)
                if reply.wait:
                    time.sleep(reply.wait)
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    began = time.monotonic()
                    for n, piece in enumerate(reply.pieces):
                        if reply.cut_after is not None and n >= reply.cut_after:
                            self.close_connection = True
                            self.wfile.flush()
                            self.connection.shutdown(2)
                            return
                        if n == reply.hold_after:
                            reply.held.set()
                            reply.release.wait(HOLD_LIMIT)
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                        self.wfile.flush()
                        with server._changed:
                            server.pieces_sent += 1
                            server._changed.notify_all()
                        if reply.delay:
                            time.sleep(
                                max(0.0, began + (n + 1) * reply.delay - time.monotonic())
                                if reply.paced
                                else reply.delay
                            )
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                    with server._changed:
                        server.completed.append(time.monotonic())
                        reply.sent_at = server.completed[-1]
                        reply.sent.set()
                        server._changed.notify_all()
                except (BrokenPipeError, ConnectionResetError):
                    with server._changed:
                        server.hangups.append(time.monotonic())
                        server._changed.notify_all()
                    self.close_connection = True

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        # A short poll interval: shutdown() waits for it, and the default (0.5 s) made every test half a second slower.
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def script(self, *replies: Reply) -> None:
        """Serve `replies` from now on, starting from the first (one long-lived server, many tests)."""
        with self._lock:
            self.replies, self._served = list(replies), 0
            self.requests.clear()
            self.hangups.clear()

    def wait_for(self, condition: Any, timeout: float = 30.0) -> bool:
        """True once `condition()` (of `requests`, `pieces_sent`, `completed`, `hangups`,
        `closed_connections`) holds, looked at again on each request, piece, finished body, hang-up and
        closed connection, not on a clock; False past `timeout`
        seconds (a guard against a hang: callers assert the result)."""
        with self._changed:
            return bool(self._changed.wait_for(condition, timeout))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> "StubServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for reply in self.replies:
            reply.release.set()  # a held stream ends with the test
        self._httpd.shutdown()
        self._httpd.server_close()


def _openai_chunk_maker() -> Any:
    """A maker of OpenAI Chat SSE chunks in the shape of the recorded
    ``openai-chat/stream-text-include-usage.sse`` (its first chunk is the template)."""
    recorded = (FIXTURES / "openai-chat" / "stream-text-include-usage.sse").read_text()
    first = json.loads(next(line[6:] for line in recorded.splitlines() if line.startswith("data: {")))
    base = {k: v for k, v in first.items() if k not in ("choices", "usage")}

    def chunk(delta: dict[str, Any], finish: str | None = None, usage: dict[str, Any] | None = None) -> bytes:
        choices = [] if usage else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        return b"data: " + json.dumps({**base, "choices": choices, "usage": usage}).encode() + b"\n\n"

    return chunk


def openai_tool_call_reply(
    name: str, arguments: dict[str, Any], *, call_id: str = "call_1", piece: int = 40, **kw: Any
) -> Reply:
    """An OpenAI Chat stream calling tool `name` with `arguments` (their JSON in `piece`-character
    fragments), ending with ``finish_reason: tool_calls``."""
    chunk = _openai_chunk_maker()
    text = json.dumps(arguments)
    call = {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
    pieces = [chunk({"role": "assistant", "content": None, "tool_calls": [call]})]
    pieces += [
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": text[i : i + piece]}}]})
        for i in range(0, len(text), piece)
    ]
    pieces += [
        chunk({}, "tool_calls"),
        chunk({}, usage={"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}),
    ]
    return Reply(pieces=pieces + [b"data: [DONE]\n\n"], **kw)


def openai_text_reply(text: str, *, piece: int = 8, usage: tuple[int, int] | None = None, **kw: Any) -> Reply:
    """An OpenAI Chat text stream saying `text`, in the shape of the recorded
    ``openai-chat/stream-text-include-usage.sse`` (its first chunk is the template); `usage`:
    (prompt, completion) tokens it reports (default 10 and one per piece)."""
    chunk = _openai_chunk_maker()
    pieces = [chunk({"role": "assistant", "content": ""})]
    pieces += [chunk({"content": text[i:i + piece]}) for i in range(0, len(text), piece)]
    tokens_in, tokens_out = usage or (10, len(pieces))
    pieces += [chunk({}, "stop"), chunk({}, usage={"prompt_tokens": tokens_in, "completion_tokens": tokens_out,
                                                   "total_tokens": tokens_in + tokens_out})]
    return Reply(pieces=pieces + [b"data: [DONE]\n\n"], **kw)
