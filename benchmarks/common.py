"""Shared by the benchmark scripts: options, medians, the printed table, the JSON file,
and a byte server on 127.0.0.1 in its own process.

Benchmarks are not tests: each prints a table and writes ``build/bench/NAME.json``.
Every figure that is compared is measured in the same run, on the same machine,
and reported as a ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT.parent / "shared" / "fixtures" / "providers"
OUT = ROOT / "build" / "bench"


def options(description: str, runs: int = 7, flags: Sequence[tuple[str, str]] = ()) -> argparse.Namespace:
    """The benchmarks' command line; `flags`: a script's own on/off options, (``--name``, help)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes and few runs: checks the script works, measures nothing"
    )
    parser.add_argument(
        "--runs", type=int, default=runs, help=f"timed runs per case (default {runs}); the median is reported"
    )
    parser.add_argument("--out", type=Path, default=OUT, help="folder of the JSON results (default build/bench)")
    for flag, text in flags:
        parser.add_argument(flag, action="store_true", help=text)
    args = parser.parse_args()
    if args.quick:
        args.runs = min(args.runs, 2)
    return args


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [[str(h) for h in header]] + [[fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    print(f"\n{title}")
    for n, row in enumerate(cells):
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))


def machine() -> dict[str, Any]:
    return {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
            "when": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def versions(*packages: str) -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str | None] = {}
    for name in packages:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


def write_json(args: argparse.Namespace, name: str, data: dict[str, Any]) -> Path:
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{name}{'-quick' if args.quick else ''}.json"
    path.write_text(
        json.dumps(
            {"benchmark": name, "quick": args.quick, "runs": args.runs, "machine": machine(), **data},
            indent=2,
            default=str,
        )
        + "\n"
    )
    print(f"\nwrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return path


class ByteServer:
    """An HTTP server in another process serving prepared bodies as fast as it can.

    ``POST /NAME/anything`` (or any path, with ``"model": "NAME"`` in the JSON request)
    answers with the file ``NAME`` of `folder` in one write
    (``Content-Length``, ``text/event-stream``), keeping the connection alive. Its own
    process, so that serving does not take the measured client's interpreter time.
    A file ``NAME.delay`` (seconds) makes it a slow provider instead: the events of
    ``NAME`` go out one by one, that long apart. ``NAME.wait`` (seconds): the answer
    starts that long after the request. ``NAME.limit`` (requests per second): beyond
    that rate, ``429`` with ``Retry-After: 1``. ``GET /stats`` gives the requests and
    429s per name so far (JSON).
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._proc: subprocess.Popen[str] | None = None
        self.url = ""

    def __enter__(self) -> "ByteServer":
        self._proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(self.folder)], stdout=subprocess.PIPE, text=True
        )
        assert self._proc.stdout is not None
        self.url = f"http://127.0.0.1:{int(self._proc.stdout.readline())}"
        return self

    @property
    def pid(self) -> int:
        """The server process's id (its CPU time: ``/proc/PID/stat``)."""
        assert self._proc is not None
        return self._proc.pid

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(timeout=5)


def _serve(folder: Path) -> None:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import threading
    from collections import Counter, deque

    settings = (".delay", ".wait", ".limit")
    bodies = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and p.suffix not in settings}
    delays = {p.stem: float(p.read_text()) for p in folder.glob("*.delay")}
    waits = {p.stem: float(p.read_text()) for p in folder.glob("*.wait")}
    limits = {p.stem: float(p.read_text()) for p in folder.glob("*.limit")}
    served: Counter[str] = Counter()
    limited: Counter[str] = Counter()
    recent: dict[str, deque[float]] = {name: deque() for name in limits}
    lock = threading.Lock()

    def over_limit(name: str) -> bool:
        """A sliding one-second window of accepted requests per limited name."""
        if name not in limits:
            return False
        now = time.monotonic()
        with lock:
            window = recent[name]
            while window and window[0] <= now - 1.0:
                window.popleft()
            if len(window) >= limits[name]:
                limited[name] += 1
                return True
            window.append(now)
            return False

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # The status line and headers go out in one write, the body in another: with Nagle's
        # algorithm on, the body waits for the client's delayed ACK of the headers (~40 ms).
        disable_nagle_algorithm = True

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            with lock:
                body = json.dumps({"served": dict(served), "limited": dict(limited)}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            request = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            name = self.path.strip("/").split("/")[0]
            if name not in bodies:  # then the model named in the request picks the body
                try:
                    name = json.loads(request).get("model", "")
                except (ValueError, AttributeError):
                    pass
            body = bodies.get(name)
            if body is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            with lock:
                served[name] += 1
            if over_limit(name):
                error = (
                    b'{"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}'
                )
                self.send_response(429)
                self.send_header("Content-Type", "application/json")
                self.send_header("Retry-After", "1")
                self.send_header("Content-Length", str(len(error)))
                self.end_headers()
                self.wfile.write(error)
                return
            if name in waits:
                time.sleep(waits[name])
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if name not in delays:
                self.wfile.write(body)
                return
            for event in body.split(b"\n\n")[:-1]:
                time.sleep(delays[name])
                self.wfile.write(event + b"\n\n")
                self.wfile.flush()

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 256  # many clients connect at once (an evaluation's lanes)

    server = Server(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__" and sys.argv[1:2] == ["--serve"]:
    _serve(Path(sys.argv[2]))
