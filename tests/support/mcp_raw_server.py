"""An MCP server that breaks the protocol on purpose, written without the SDK: raw JSON-RPC lines
over stdio. Each tool answers in one wrong way (its name says how); `RAW_MODE=deep_schema` lists a
tool whose input schema nests deeper than the SDK's JSON parser allows, `RAW_MODE=refuse`
refuses ``initialize`` with an error of its own. `RAW_SECRET` is a secret
the server puts into what it sends (the tests check it never shows). Every request it receives is
appended as a JSON line to `RAW_RECORD` (when set), so a test can count its ``initialize`` calls.

Run: ``python tests/support/mcp_raw_server.py``.
"""

from __future__ import annotations

import json
import os
import sys

SECRET = os.environ.get("RAW_SECRET", "none")
DEPTH = 5000  # deeper than any JSON parser's default recursion limit

TOOLS = ["echo", "leak", "rpc_error", "deep", "null", "garbage", "bad_content"]


def send(obj: object) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def raw(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def nested(depth: int, leaf: str) -> str:
    return '{"a":' * depth + leaf + "}" * depth


def tools() -> list[dict]:
    listed = [{"name": n, "description": f"tool {n}", "inputSchema": {"type": "object"}} for n in TOOLS]
    if os.environ.get("RAW_MODE") == "deep_schema":
        listed.append({"name": "deep_schema", "inputSchema": json.loads(nested(200, '{"type":"string"}'))})
    return listed


def text(id_: object, words: str) -> None:
    send({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": words}]}})


def call(id_: object, name: str, params: dict) -> None:
    token = (params.get("_meta") or {}).get("progressToken")
    if name == "echo":
        text(id_, str((params.get("arguments") or {}).get("text", "")))
    elif name == "leak":  # two notifications the SDK cannot validate, quoting the secret
        send({"jsonrpc": "2.0", "method": "notifications/message",
              "params": {"level": "error", "logger": {"t": SECRET}, "data": "x"}})
        send({"jsonrpc": "2.0", "method": "notifications/progress",
              "params": {"progressToken": token, "progress": "p " + SECRET}})
        text(id_, "leaked?")
    elif name == "rpc_error":  # the server's own error, in JSON-RPC's "server error" range; it stays up
        send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32000, "message": f"internal: token={SECRET}"}})
    elif name == "deep":
        content = '{"content":[{"type":"text","text":"deep"}],"structuredContent":' + nested(DEPTH, '"x"') + "}"
        raw('{"jsonrpc":"2.0","id":' + json.dumps(id_) + ',"result":' + content + "}")
    elif name == "null":
        send({"jsonrpc": "2.0", "id": id_, "result": None})
    elif name == "garbage":  # lines that are no message at all, then the answer
        raw("this is not json at all")
        raw("{broken json")
        text(id_, "after garbage")
    elif name == "bad_content":
        send({"jsonrpc": "2.0", "id": id_,
              "result": {"content": [{"type": "text"}, {"nottype": 1}, 5, None, {"type": "hologram"}]}})
    else:
        send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32602, "message": f"no tool {name}"}})


def answer(message: dict) -> None:
    method, id_, params = message.get("method"), message.get("id"), message.get("params") or {}
    if id_ is None:
        return  # a notification
    if method == "initialize" and os.environ.get("RAW_MODE") == "refuse":  # its own error; it stays up
        send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32000, "message": f"not today: token={SECRET}"}})
    elif method == "initialize":
        send({"jsonrpc": "2.0", "id": id_, "result": {
            "protocolVersion": params.get("protocolVersion", "2025-11-25"),
            "capabilities": {"tools": {}, "logging": {}}, "serverInfo": {"name": "raw", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": id_, "result": {"tools": tools()}})
    elif method == "tools/call":
        call(id_, params.get("name", ""), params)
    else:
        send({"jsonrpc": "2.0", "id": id_, "result": {}})


def main() -> None:
    record = os.environ.get("RAW_RECORD")
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if record:
            with open(record, "a", encoding="utf-8") as f:
                f.write(json.dumps({"method": message.get("method")}) + "\n")
        answer(message)


if __name__ == "__main__":
    main()
