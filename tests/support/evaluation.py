"""Rows and responders for evaluation tests: capitals to ask for, a server answering from the
question, and one that rate-limits its first request."""

from __future__ import annotations

import threading
from typing import Any

from .stub_server import Reply, openai_text_reply

CAPITALS = [{"country": "France", "capital": "Paris"}, {"country": "Japan", "capital": "Tokyo"},
            {"country": "Peru", "capital": "Lima"}]


def last_user_text(body: dict[str, Any]) -> str:
    content = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def answering(answer, **reply: Any):
    """A responder: the reply text is `answer(question)` (the last user message)."""
    return lambda body: openai_text_reply(answer(last_user_text(body)), **reply)


def capital_of(question: str) -> str:
    for row in CAPITALS:
        if row["country"] in question:
            return f"The capital is {row['capital']}."
    return "I do not know."


def limited_once(answer, **reply: Any):
    """A responder: the first request gets ``429, Retry-After: 1`` (`respond.too_many`, whose
    `sent_at` says when it was written whole), every later one `answering(answer)`, but not
    before that 429 has been sent: a row in flight with the 429 ends after it, so the row that
    follows in its place starts once the lane knows of the 429 (the order comes from the
    server, not from timing)."""
    lock = threading.Lock()
    too_many = Reply(status=429, headers={"Content-Type": "application/json", "Retry-After": "1"},
                     pieces=[b'{"error": {"message": "slow down", "type": "rate_limit_error"}}'])
    answered = answering(answer, **reply)
    first = [True]

    def respond(body: dict[str, Any]) -> Reply:
        with lock:
            limited, first[0] = first[0], False
        if limited:
            return too_many
        later = answered(body)
        later.after = too_many.sent
        return later

    respond.too_many = too_many  # type: ignore[attr-defined]
    return respond


def finished_evaluation(rows: int, *, failing: set[int] = frozenset(), answer: int = 40, columns: int = 2) -> Any:
    """An `Evaluation` of `rows` × `columns` finished runs, built without a server: each row asks
    ``What is N?`` and checks ``contains:{{ row.want }}``; a row in `failing` fails on the last
    column (the columns disagree there); every answer `answer` characters long."""
    from ipyagent.agent import EvalResult, Evaluation
    from ipyagent.agent.evaluation.checks import Outcome

    check = "contains:{{ row.want }}"
    providers = [f"openai:m{c}" for c in range(columns)]
    fields = [{"n": n, "want": f"It is {n}."} for n in range(rows)]
    ev = Evaluation(providers, fields, assertions=[check])
    for n, row in enumerate(fields):
        for c, provider in enumerate(providers):
            ok = not (n in failing and c == columns - 1)
            text = (f"It is {n}." if ok else "No idea.").ljust(answer, ".")
            ev.results.append(EvalResult(row=n, provider=provider, prompt=f"What is {n}?", fields=row, text=text,
                                         passed=ok, outcomes=[Outcome(check, ok, reason=None if ok else "not there")],
                                         total_s=0.05, input_tokens=10, output_tokens=5))
    return ev
