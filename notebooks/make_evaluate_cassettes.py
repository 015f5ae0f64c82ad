"""Writes the cassettes notebooks/evaluate.ipynb replays when no API key is set.

The answers are written by us (not recorded from the providers), in each
provider's real streaming format (the writers of `make_cassettes.py`). The
evaluation runs through the real drivers with a recording transport, exactly
as the notebook's ``%%compare --over`` cell sends it, so each cassette holds the
requests the notebook makes: one per row, prompt variant and repeat for each
model (a repeat sends the same request again; each gets its own answer, in
order), and one per distinct answer for the judge. The data set, variants,
rubric and answers must match the notebook.

Run from the repo root: ``.venv/bin/python notebooks/make_evaluate_cassettes.py``.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx2

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from make_cassettes import WRITERS, compare_driver, sse_body  # noqa: E402

import ipyagent  # noqa: E402
from ipyagent import Agent  # noqa: E402
from ipyagent.drivers import current_model  # noqa: E402
from ipyagent.drivers.cassette import RecordingTransport  # noqa: E402
from ipyagent.drivers.protocols.openai_chat import OpenAIChatPromptDriver  # noqa: E402

#: The notebook's data set: (country, capital).
CITIES = [("France", "Paris"), ("Japan", "Tokyo"), ("Kenya", "Nairobi"), ("Peru", "Lima"), ("Canada", "Ottawa"),
          ("Australia", "Canberra"), ("Brazil", "Brasília"), ("Turkey", "Ankara"), ("Nigeria", "Abuja"),
          ("Switzerland", "Bern"), ("New Zealand", "Wellington"), ("Morocco", "Rabat"), ("Vietnam", "Hanoi"),
          ("Bolivia", "Sucre"), ("Myanmar", "Naypyidaw"), ("Kazakhstan", "Astana"),
          ("Sri Lanka", "Sri Jayawardenepura Kotte"), ("Tanzania", "Dodoma"), ("Côte d'Ivoire", "Yamoussoukro"),
          ("Iceland", "Reykjavík")]
#: The two prompt variants, as the notebook's cell writes them (``--- variant NAME ---``).
VARIANTS = {
    "terse": "What is the capital of {{ row.country }}? Answer in one short sentence.",
    "careful": "What is the official capital of {{ row.country }}? Some countries have a better-known city, or more "
               "than one capital: name the one their constitution names, in one short sentence.",
}
REPEAT = 3
RUBRIC = "The answer names the official capital city of the country and says nothing false."
JUDGE = ("openai", current_model("openai"))
MODELS = {p: current_model(p) for p in ("openai", "anthropic")}

#: Each column's mistakes: (provider, variant) -> country -> (the repeats that get it, the answer). Every other
#: answer is right. Anthropic's terse Bolivia names the capital but calls La Paz one too: the judge fails it.
MISTAKES: dict[tuple[str, str], dict[str, tuple[tuple[int, ...], str]]] = {
    ("openai", "terse"): {"Australia": ((0, 1, 2), "The capital of Australia is Sydney."),
                          "Myanmar": ((0, 1, 2), "The capital of Myanmar is Yangon."),
                          "Bolivia": ((0, 1, 2), "The capital of Bolivia is La Paz."),
                          "Kazakhstan": ((1,), "The capital of Kazakhstan is Almaty.")},
    ("openai", "careful"): {"Bolivia": ((2,), "The official capital of Bolivia is La Paz.")},
    ("anthropic", "terse"): {"Sri Lanka": ((0, 1, 2), "The capital of Sri Lanka is Colombo."),
                             "Bolivia": ((0, 1, 2), "Bolivia's constitutional capital is Sucre, while the seat of "
                                                    "government is La Paz, which many people think of as the capital."),
                             "Tanzania": ((0,), "The capital of Tanzania is Dar es Salaam.")},
    ("anthropic", "careful"): {},
}


def answer(provider: str, question: str, repeat: int) -> str:
    """The reply of `provider` to `question` (a variant's prompt for one row), its `repeat`-th time."""
    variant = "careful" if question.startswith("What is the official capital") else "terse"
    country = next(c for c, _ in CITIES if f" of {c}?" in question)
    capital = dict(CITIES)[country]
    repeats, wrong = MISTAKES[provider, variant].get(country, ((), ""))
    if repeat in repeats:
        return wrong
    return f"The {'official ' if variant == 'careful' else ''}capital of {country} is {capital}."


def verdict(judge_prompt: str) -> str:
    """The judge's verdict on the answer quoted in its prompt: right when it names the capital and no other city."""
    question = judge_prompt.split("Question:\n", 1)[1].split("\n\nAnswer:", 1)[0]
    reply = judge_prompt.split("Answer:\n", 1)[1]
    country = next(c for c, _ in CITIES if f" of {c}?" in question)
    capital = dict(CITIES)[country]
    wrong = any(reply == m for mistakes in MISTAKES.values() for repeats, m in mistakes.values())
    if not wrong:
        return json.dumps({"pass": True, "reason": f"Names {capital}, the capital of {country}."})
    if capital in reply:
        return json.dumps({"pass": False, "reason": f"Names {capital} but also calls another city the capital."})
    return json.dumps({"pass": False, "reason": f"The capital of {country} is {capital}, not the city named."})


def _user_text(body: dict[str, Any]) -> str:
    if "messages" in body:  # OpenAI Chat, Anthropic
        content = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
        return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
    return "".join(p.get("text", "") for p in body["contents"][-1]["parts"])  # Gemini


def recording(driver: Any, path: Path, reply: Any) -> Any:
    """`driver` with a transport that answers `reply(user text, n)` in its format and records to `path`; n
    counts the times that same request body came before (a cell's repeats send the same request)."""
    path.unlink(missing_ok=True)
    counter = iter(range(10_000))
    seen: dict[str, int] = {}

    def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        key = json.dumps(body, sort_keys=True)
        repeat = seen[key] = seen.get(key, -1) + 1
        text = reply(_user_text(body), repeat)
        n = next(counter)
        if isinstance(driver, OpenAIChatPromptDriver):
            content, kind = (
                sse_body(text, n, 12 + len(json.dumps(body["messages"])) // 4),
                "text/event-stream; charset=utf-8",
            )
        else:
            writer, kind = WRITERS[driver.protocol]
            content = writer(text, n, 12 + len(json.dumps(body)) // 5, driver.model)
        return httpx2.Response(200, headers={"content-type": kind}, content=content)

    driver.transport = RecordingTransport(path, provider=driver.provider, model=driver.model,
                                          inner=httpx2.MockTransport(handler), base_url=driver.base_url)
    return driver


def main() -> None:
    rows = [{"country": c, "capital": cap} for c, cap in CITIES]
    for old in ("gemini",):  # the story had a third model before its variants and repeats
        (HERE / f"evaluate-{old}.cassette.jsonl").unlink(missing_ok=True)
    agents = [Agent(recording(compare_driver(p, m), HERE / f"evaluate-{p}.cassette.jsonl",
                              lambda q, k, p=p: answer(p, q, k))) for p, m in MODELS.items()]
    judge_driver = recording(OpenAIChatPromptDriver(JUDGE[1], api_key="sk-not-a-real-key"),
                             HERE / "evaluate-judge.cassette.jsonl", lambda q, k: verdict(q))
    with tempfile.TemporaryDirectory() as folder:
        ev = ipyagent.evaluate(agents, None, rows, prompts=VARIANTS, repeat=REPEAT,
                               assertions=["icontains:{{ row.capital }}", f"judge:{JUDGE[0]}:{JUDGE[1]}"],
                               rubric=RUBRIC, judge_factory=lambda pid: Agent(judge_driver), concurrency=1,
                               store=Path(folder) / "runs.sqlite")
    assert all(r.ok for r in ev.results), [r.error for r in ev.results if not r.ok]
    for path in sorted(HERE.glob("evaluate-*.cassette.jsonl")):  # in row order, whatever order the runs finished in
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        lines.sort(key=lambda e: re.sub(r"\s+", " ", json.dumps(e["request"]["body"], sort_keys=True)))
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        print(f"wrote {path} ({len(lines)} exchanges)")
    print(ev)


if __name__ == "__main__":
    main()
