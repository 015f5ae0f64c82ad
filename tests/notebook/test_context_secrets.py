"""Nothing secret goes to a model as context (issue 26): in a real kernel, with a key in the
environment, a key set by ``%env``, a plain variable holding a key and a dict holding a database
URL with its password, every way a cell gathers context (``{{ error }}``, ``{{ os.environ }}``,
``{{ cfg }}``, ``--with``, ``--cells``, ``%agent fix``) and the turn after them send none of the
four to the model: the mask goes instead, counted in ``%agent inspect`` and the transcript."""

from __future__ import annotations

import json
import secrets

import pytest

from ..support.kernels import wait_reply
from ..support.stub_server import StubServer, openai_text_reply

pytestmark = pytest.mark.notebook

TRANSCRIPT = "application/vnd.ipyagent.transcript+json"

ENV_KEY = "sk-live-" + secrets.token_hex(12)  # OPENAI_API_KEY, in the kernel's environment
ENV_SET = "svc-" + secrets.token_hex(10)  # %env SERVICE_TOKEN=...
PLAIN = "sk-live-" + secrets.token_hex(12)  # api_key = "..."
PASSWORD = "Pa55-" + secrets.token_hex(8)  # in cfg's postgres:// URL
SECRETS = {"environment": ENV_KEY, "%env": ENV_SET, "variable": PLAIN, "URL password": PASSWORD}

SETUP = [
    "%load_ext ipyagent",
    "%provider openai:m --base-url {url}/v1",
    f"%env SERVICE_TOKEN={ENV_SET}",
    f'api_key = "{PLAIN}"',
    f'cfg = {{"db": "postgres://app:{PASSWORD}@db/x", "retries": 3}}',
    "import os",
    "raise ValueError(cfg)",
]
#: Each way of gathering context, then the next turn of the same conversation (which sends them all again).
ASKS = [
    "%%agent\nExplain: {{ error }}",
    "%%agent\nWhich of these matter? {{ os.environ }}",
    "%%agent\nCheck {{ cfg }} and {{ api_key }}",
    "%%agent --with cfg\nIs this config right?",
    "%%agent --with os.environ\nWhat is set?",
    "%%agent --cells 8\nWhat did I do?",
    "%agent fix",
    "%%agent\nAnd what next?",
]


def test_no_secret_reaches_the_model_by_any_context_path(monkeypatch: pytest.MonkeyPatch) -> None:
    from jupyter_client.manager import start_new_kernel

    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    with StubServer(openai_text_reply("Noted.")) as server:
        km, kc = start_new_kernel(kernel_name="python3")
        try:
            for code in SETUP:
                wait_reply(kc, kc.execute(code.replace("{url}", server.url)), 60)
            errors, footers = [], []
            for code in ASKS:
                reply, iopub = wait_reply(kc, kc.execute(code), 60)
                assert reply["content"]["status"] == "ok", (code, reply["content"])
                errors.append("".join(m["content"].get("text", "") for m in iopub
                                      if m["msg_type"] == "stream" and m["content"]["name"] == "stderr"))
                footers += [m["content"]["data"]["text/plain"] for m in iopub if m["msg_type"] == "update_display_data"
                            and TRANSCRIPT in m["content"]["data"]]
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    bodies = [json.dumps(r["body"]) for r in server.requests]
    assert len(bodies) == len(ASKS)
    for n, body in enumerate(bodies):
        leaked = [what for what, secret in SECRETS.items() if secret in body]
        assert not leaked, f"{ASKS[n]!r} sent the {leaked} secret to the model"
        assert "[redacted]" in body, ASKS[n]
    history = json.loads(bodies[-1])["messages"]
    assert len(history) == 2 * len(ASKS) - 1  # the last turn carries every earlier one, masked
    assert (
        "masked" in errors[0] and "%agent settings redact_context=false" in errors[0]
    )  # the warning names the opt-out
    assert "2 values masked (cell template 2)" in footers[0]  # the transcript says so: the password, twice in the error
