"""``%%compare --over ... --background`` in a real kernel: the cell ends at once, its progress view
keeps filling while other cells run, an interrupt of another cell does not touch it, and a kernel
shutdown stops it with every finished run kept in the run store. Replies are held by events."""

from __future__ import annotations

import os
import threading

import pytest

from ipyagent.memory.store import RunStore

from ..support.evaluation import last_user_text
from ..support.kernels import wait_iopub, wait_reply
from ..support.stub_server import StubServer, openai_text_reply

pytestmark = pytest.mark.notebook


def _printed(iopub: list[dict]) -> str:
    return "".join(m["content"].get("text", "") for m in iopub if m["msg_type"] == "stream").strip()


@pytest.mark.timeout(120)
def test_background_in_a_kernel_outlives_other_cells_and_their_interrupts_and_a_shutdown_keeps_its_runs() -> None:
    from jupyter_client.manager import start_new_kernel

    gate = threading.Event()

    def reply(body):  # q0 answers at once; every other row holds its stream until the gate opens
        text = last_user_text(body)
        return openai_text_reply(f"answer {text}", **({} if text == "q0" else {"hold_after": 1, "release": gate}))

    with StubServer(responder=reply) as server:
        km, kc = start_new_kernel(kernel_name="python3")  # the run store: $IPYAGENT_RUN_STORE (conftest)
        try:
            setup = (f"%load_ext ipyagent\n%provider openai:m --base-url {server.url}\n"
                     "rows = [f'q{n}' for n in range(6)]")
            answer, _ = wait_reply(kc, kc.execute(setup), 60)
            assert answer["content"]["status"] == "ok", answer["content"]
            answer, seen = wait_reply(kc, kc.execute("%%compare openai:m --over rows --concurrency 6 --background "
                                                     "-o ev\n{{ row }}"), 60)
            assert answer["content"]["status"] == "ok", answer["content"]
            # the cell has ended; its view goes on filling: the quick row's end is drawn (before the
            # cell's reply reached us, or after it)
            drawn = lambda m: m["msg_type"] == "comm_msg" and "1 / 6 runs" in str(m["content"]["data"])  # noqa: E731
            if not any(drawn(m) for m in seen):
                wait_iopub(kc, drawn, 30)
            check, iopub = wait_reply(kc, kc.execute("print(ev.done, ev.progress.finished, ev.progress.total)"), 30)
            assert _printed(iopub) == "False 1 6"  # a following cell ran to its end meanwhile
            # another cell, interrupted: the background evaluation is not touched
            blocked = kc.execute("import threading\nprint('waiting', flush=True)\nthreading.Event().wait()")
            wait_iopub(kc, lambda m: m["msg_type"] == "stream" and "waiting" in m["content"]["text"], 30)
            km.interrupt_kernel()
            answer, _ = wait_reply(kc, blocked, 30)
            assert answer["content"]["ename"] == "KeyboardInterrupt"
            _, iopub = wait_reply(kc, kc.execute("print(ev.done, ev.interrupted, ev.id)"), 30)
            done, interrupted, ev_id = _printed(iopub).split()
            assert (done, interrupted) == ("False", "False")
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=False)  # a shutdown request: the process' end stops the evaluation
            gate.set()
    store = RunStore(os.environ["IPYAGENT_RUN_STORE"])
    try:
        assert [run["prompt"] for run in store.runs(session=ev_id)] == ["q0"]  # the finished run was kept
    finally:
        store.close()
