"""The secrets matrix (issue 11): keys under five variable names (two of them not named like a
secret), a password in a base URL's user-info and a key in its query, against a server that
reflects the ``Authorization`` header (raw, base64, URL-encoded) in its SSE text, in tool-call
arguments and in an error body. After a real kernel ran the lot, the saved notebook (widget
state included), the run store file, the cassette and the text of ``%agent inspect / runs /
history``, ``%provider`` and reprs hold none of those secrets in any of those forms."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from urllib.parse import quote

import pytest

from ..support.stub_server import StubServer
from ..support.replies import reflect

pytestmark = pytest.mark.notebook

#: variable -> key; the last two names do not look secret. '+', '/' and '=' make the URL-encoded form differ.
KEYS = {
    "ACME_API_KEY": "acme-Key+9/Lx2=QpR7tV",
    "SERVICE_TOKEN": "tok-4f9a8b7c6d5e4f3a2b1c",
    "LLM_SECRET": "sec-Zz81+yy/ww33==",
    "CORP_LLM": "corp-Hq7+Kd/2mN4=xyZ",
    "MODEL_CONFIG": "cfg-0a1b2c3d4e5f6a7b8c9d",
}
USER, PASSWORD, QUERY_KEY = "alice", "pw-Userinfo-7781", "qk-Query-99812"


def _forms(secret: str, header: str) -> dict[str, str]:
    return {"raw": secret, "base64": base64.b64encode(secret.encode()).decode().rstrip("="),
            "header-base64": base64.b64encode(header.encode()).decode().rstrip("="),
            "url-encoded": quote(secret, safe="")}


def _cells(url: str, store: Path, cassette: Path) -> list[str]:
    cells = ["%load_ext ipyagent", f"%agent store {store}", "import os\nurl = os.environ['MATRIX_URL']\n"
             "creds_url = os.environ['MATRIX_CREDS_URL']\nbad_url = creds_url.replace('http', 'ftp')",
             'def echo(text: str) -> str:\n    """Echo the text."""\n    return text']
    for n, var in enumerate(KEYS):
        cells.append(f"%provider --alias p{n} openai:m --base-url $url --api-key-env {var}")
    cells += ["%provider --alias creds openai:m --base-url $creds_url",
              f"%provider openai:m --base-url $creds_url --record {cassette}", "%provider",
              "%provider openai:m --base-url $bad_url"]
    cells += [f"%%agent -p p{n} --tools echo\nsay it" for n in range(len(KEYS))]
    cells += ["%%agent --tools echo\nsay it", "%provider --alias e0 openai:err --base-url $url --api-key-env CORP_LLM",
              "%%agent -p e0\nsay it", "%agent runs", "%agent inspect", "%agent history",
              "from ipyagent import Agent\na = Agent('openai:m', base_url=creds_url)\nprint(repr(a), repr(a.driver))",
              "b = Agent('openai:m', base_url=url, api_key_env='MODEL_CONFIG')\nb.driver"]
    return cells


def test_no_secret_in_any_form_reaches_the_notebook_store_or_cassette(tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    store, cassette, saved = tmp_path / "runs.sqlite", tmp_path / "rec.cassette.jsonl", tmp_path / "matrix.ipynb"
    with StubServer(respond=reflect) as server:
        host = server.url.removeprefix("http://")
        for var, key in KEYS.items():
            monkeypatch.setenv(var, key)
        monkeypatch.setenv("MATRIX_URL", f"{server.url}/v1")
        monkeypatch.setenv("MATRIX_CREDS_URL", f"http://{USER}:{PASSWORD}@{host}/v1?key={QUERY_KEY}")
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in _cells(server.url, store, cassette)])
        NotebookClient(nb, timeout=90, kernel_name="python3", store_widget_state=True,
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
        nbformat.write(nb, saved)

    headers = {r["headers"].get("Authorization", "") for r in server.requests}
    secrets = {var: (key, f"Bearer {key}") for var, key in KEYS.items()}
    secrets["userinfo"] = (PASSWORD, "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode())
    secrets["query"] = (QUERY_KEY, QUERY_KEY)
    # Every secret went out (so each one was in play), the creds URL as HTTP Basic auth.
    assert {h for _, h in secrets.values()} - {QUERY_KEY} <= headers
    assert any(QUERY_KEY in r["path"] for r in server.requests)

    text = {"notebook": saved.read_text(), "run store": store.read_bytes().decode("utf-8", "replace"),
            "cassette": cassette.read_text()}
    hits = [(where, name, form) for name, (secret, header) in secrets.items()
            for form, value in _forms(secret, header).items() for where, body in text.items() if value in body]
    assert hits == []
    # The outputs are there, redacted: an answer, a tool result, the error, the listings, the reprs.
    outputs = text["notebook"]
    assert outputs.count("[redacted]") > 20 and "bad credentials" in outputs and "http://[redacted]@" in outputs
    # The live view keeps no text in widget state (its frames are messages, redacted: test_view.py),
    # so the saved widget state holds nothing of the answers at all.
    widgets = json.dumps(nb.metadata.get("widgets", {}))
    assert "header Bearer" not in widgets and "bad credentials" not in widgets
