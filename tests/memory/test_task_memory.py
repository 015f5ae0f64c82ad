"""Task Memory and the TaskMemoryTool activities (list, read, search, summarize, query)
on text, table, JSON, blob and image artifacts; the query sub-prompts go to a local server."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import zlib
from typing import Any

import pytest

from ipyagent.core import (
    BlobArtifact,
    ErrorArtifact,
    ImageArtifact,
    JsonArtifact,
    TableArtifact,
    TextArtifact,
    ToolAction,
)
from ipyagent.drivers import create_driver
from ipyagent.memory import TaskMemory
from ipyagent.memory.artifacts import size_of, to_memory_artifact
from ipyagent.memory.reading import PASSAGE_TARGET
from ipyagent.memory.task_memory import reference
from ipyagent.memory.tokens import CHARS_PER_TOKEN, estimate_text
from ipyagent.tools.builtin import TaskMemoryTool

from ..support.stub_server import StubServer, openai_text_reply

# A text of numbered paragraphs, each about a different subject, so a search has one right answer.
SUBJECTS = ["volcanoes erupt basalt", "glaciers carve fjords", "coral reefs bleach", "deserts bloom after rain",
            "rivers meander across plains", "tides follow the moon", "auroras glow near the poles",
            "monsoons flood the delta", "earthquakes shake the fault", "geysers spout boiling water"]
TEXT = "\n\n".join(
    f"Paragraph {i}. " + (f"In this part {s}. " * 12).strip() + f" Code ERR-{100 + i}." for i, s in enumerate(SUBJECTS)
)
ROWS = [
    {"region": r, "quarter": q, "sales": 100 * i + q}
    for i, r in enumerate(["north", "south", "east", "west"])
    for q in (1, 2, 3)
]


def png(width: int = 4, height: int = 3) -> bytes:
    """A real PNG (grey pixels), written with zlib: no imaging library needed."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return len(data).to_bytes(4, "big") + kind + data + zlib.crc32(kind + data).to_bytes(4, "big")
    raw = b"".join(b"\x00" + bytes([128] * width) for _ in range(height))
    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 0, 0, 0, 0])
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


BLOB = bytes(range(256)) * 3  # not UTF-8


@pytest.fixture
def memory() -> TaskMemory:
    return TaskMemory()


@pytest.fixture
def stored(memory: TaskMemory) -> dict[str, str]:
    """Namespace of each kind of artifact, stored as a tool would return it."""
    values = {"text": TEXT, "table": ROWS, "json": {"a": [1, 2, {"b": "c"}]}, "blob": BLOB, "image": png()}
    return {
        kind: memory.store(to_memory_artifact(v), tool="Source", activity=f"get_{kind}").namespace
        for kind, v in values.items()
    }


def call(tool: TaskMemoryTool, activity: str, **arguments: Any) -> Any:
    """Run one activity as the agent would; the JSON result parsed, or the ErrorArtifact."""
    artifact = asyncio.run(tool.run(activity, ToolAction(tag="call_1", name=tool.name, path=activity, input=arguments)))
    return artifact if isinstance(artifact, ErrorArtifact) else json.loads(artifact.to_text())


# -- what is stored ---------------------------------------------------------------------------------


def test_tool_outputs_keep_their_shape(stored: dict[str, str], memory: TaskMemory) -> None:
    kinds = {k: type(memory[ns]) for k, ns in stored.items()}
    assert kinds == {
        "text": TextArtifact,
        "table": TableArtifact,
        "json": JsonArtifact,
        "blob": BlobArtifact,
        "image": ImageArtifact,
    }
    table = memory[stored["table"]]
    assert table.columns == list(ROWS[0]) and table.value == ROWS
    assert memory[stored["image"]].mime_type == "image/png"
    assert size_of(memory[stored["text"]]) == {"chars": len(TEXT)}
    assert size_of(table) == {"rows": len(ROWS), "columns": len(ROWS[0])}
    assert size_of(memory[stored["blob"]]) == {"bytes": len(BLOB)}


def test_dataframe_becomes_a_table() -> None:
    pandas = pytest.importorskip("pandas")
    df = pandas.DataFrame(ROWS)
    artifact = to_memory_artifact(df)
    assert isinstance(artifact, TableArtifact)
    assert artifact.columns == list(df.columns) and artifact.value == df.to_dict(orient="records")


def test_bytes_round_trip_through_json(stored: dict[str, str], memory: TaskMemory) -> None:
    from ipyagent.memory.recorder import artifact_from_json, artifact_json

    for kind in ("blob", "image", "table", "json"):
        artifact = memory[stored[kind]]
        assert artifact_from_json(artifact_json(artifact)) == artifact


def test_reference_says_where_and_how_but_holds_no_content(stored: dict[str, str], memory: TaskMemory) -> None:
    ref = json.loads(reference(memory.entry(stored["text"])))
    assert ref["namespace"] == stored["text"] and ref["memory"] == memory.name
    assert ref["tool"] == "Source" and ref["activity"] == "get_text"
    assert ref["artifact_type"] == "text" and ref["size"] == {"chars": len(TEXT)}
    assert "TaskMemory_read" in ref["how_to_read"]["read"] and "TaskMemory_search" in ref["how_to_read"]["search"]
    assert not any(s in json.dumps(ref) for s in SUBJECTS)
    table_ref = json.loads(reference(memory.entry(stored["table"])))
    assert table_ref["columns"] == list(ROWS[0]) and "rows" in table_ref["how_to_read"]["read"]


def test_namespaces_are_fresh_per_call(memory: TaskMemory) -> None:
    first = memory.store(TextArtifact(value="a"), tool="T", activity="fetch")
    second = memory.store(TextArtifact(value="a"), tool="T", activity="fetch")
    assert first.namespace != second.namespace and {first.namespace, second.namespace} <= set(memory)


# -- list and read ----------------------------------------------------------------------------------


def test_list(stored: dict[str, str], memory: TaskMemory) -> None:
    listing = call(TaskMemoryTool(memory), "list")
    assert [e["namespace"] for e in listing] == list(stored.values())
    assert [e["type"] for e in listing] == list(stored)
    assert all(e["tool"].startswith("Source.get_") for e in listing)


def test_read_text_slices_at_the_boundaries(stored: dict[str, str], memory: TaskMemory) -> None:
    tool, ns = TaskMemoryTool(memory), stored["text"]
    first = call(tool, "read", namespace=ns, offset=0, length=10)
    assert (first["content"], first["unit"], first["end"], first["next_offset"], first["total"]) == (
        TEXT[:10],
        "chars",
        10,
        10,
        len(TEXT),
    )
    tail = call(tool, "read", namespace=ns, offset=len(TEXT) - 5, length=10)
    assert tail["content"] == TEXT[-5:] and tail["end"] == len(TEXT) and tail["next_offset"] is None
    exact = call(tool, "read", namespace=ns, offset=len(TEXT) - 10, length=10)
    assert exact["content"] == TEXT[-10:] and exact["next_offset"] is None
    past = call(tool, "read", namespace=ns, offset=len(TEXT), length=10)
    assert past["content"] == "" and "past the end" in past["note"]
    # reading on from next_offset gives the whole text back, piece by piece
    pieces, offset = [], 0
    while offset is not None:
        piece = call(tool, "read", namespace=ns, offset=offset, length=999)
        pieces.append(piece["content"])
        offset = piece["next_offset"]
    assert "".join(pieces) == TEXT
    default = call(tool, "read", namespace=ns)
    assert default["content"] == TEXT[:2000]


def test_read_is_capped_and_checks_its_arguments(stored: dict[str, str], memory: TaskMemory) -> None:
    tool = TaskMemoryTool(memory, max_chars=100)
    capped = call(tool, "read", namespace=stored["text"], length=5000)
    assert capped["content"] == TEXT[:100] and "at most 100" in capped["capped"]
    for bad in ({"offset": -1}, {"length": 0}):
        error = call(tool, "read", namespace=stored["text"], **bad)
        assert isinstance(error, ErrorArtifact) and ("offset" in error.value or "length" in error.value)
    missing = call(tool, "read", namespace="nope-1")
    assert isinstance(missing, ErrorArtifact) and "nope-1" in missing.value and stored["text"] in missing.value


def test_read_table_by_rows(stored: dict[str, str], memory: TaskMemory) -> None:
    tool, ns = TaskMemoryTool(memory), stored["table"]
    middle = call(tool, "read", namespace=ns, offset=3, length=2)
    assert middle["unit"] == "rows" and middle["content"] == ROWS[3:5] and middle["columns"] == list(ROWS[0])
    assert middle["next_offset"] == 5 and middle["total"] == len(ROWS)
    last = call(tool, "read", namespace=ns, offset=len(ROWS) - 1, length=5)
    assert last["content"] == ROWS[-1:] and last["next_offset"] is None
    assert call(tool, "read", namespace=ns)["content"] == ROWS[:20]


def test_read_blob_and_image_by_bytes(stored: dict[str, str], memory: TaskMemory) -> None:
    tool = TaskMemoryTool(memory)
    for kind, data in (("blob", BLOB), ("image", png())):
        head = call(tool, "read", namespace=stored[kind], offset=0, length=16)
        assert head["unit"] == "bytes" and head["encoding"] == "base64"
        assert base64.b64decode(head["content"]) == data[:16]
        tail = call(tool, "read", namespace=stored[kind], offset=len(data) - 3, length=16)
        assert base64.b64decode(tail["content"]) == data[-3:] and tail["next_offset"] is None
    text_blob = memory.store(to_memory_artifact("héllo wörld".encode()), tool="T").namespace
    assert call(tool, "read", namespace=text_blob, offset=0, length=6)["content"] == "héllo"


def test_read_json_array_by_items(memory: TaskMemory) -> None:
    ns = memory.store(to_memory_artifact([1, "two", [3]]), tool="T").namespace
    out = call(TaskMemoryTool(memory), "read", namespace=ns, offset=1, length=5)
    assert out["unit"] == "items" and out["content"] == ["two", [3]] and out["next_offset"] is None


# -- search -----------------------------------------------------------------------------------------


def test_search_text_ranks_the_right_passage_with_its_position(stored: dict[str, str], memory: TaskMemory) -> None:
    tool = TaskMemoryTool(memory)
    for i, subject in enumerate(SUBJECTS):
        word = subject.split()[0]
        hits = call(tool, "search", query=f"{word}?", namespace=stored["text"], limit=3)
        best = hits[0]
        pos = best["position"]
        assert f"Paragraph {i}." in TEXT[pos["offset"]:pos["end"]], (word, best)
        assert pos["line"] == TEXT.count("\n", 0, pos["offset"]) + 1
        assert best["score"] > 0 and all(h["score"] <= best["score"] for h in hits)
        assert TEXT[pos["offset"]:pos["end"]] == best["passage"]
    assert call(tool, "search", query="zeppelin", namespace=stored["text"]) == []


def test_search_regex_gives_exact_positions(stored: dict[str, str], memory: TaskMemory) -> None:
    hits = call(TaskMemoryTool(memory), "search", query=r"ERR-1\d\d", regex=True, namespace=stored["text"], limit=50)
    assert [h["match"] for h in hits] == re.findall(r"ERR-1\d\d", TEXT)
    for hit in hits:
        pos = hit["position"]
        assert TEXT[pos["offset"]:pos["end"]] == hit["match"]
        assert pos["line"] == TEXT.count("\n", 0, pos["offset"]) + 1
    bad = call(TaskMemoryTool(memory), "search", query="(unclosed", regex=True)
    assert isinstance(bad, ErrorArtifact) and "does not compile" in bad.value


def test_search_table_rows_and_all_namespaces(stored: dict[str, str], memory: TaskMemory) -> None:
    tool = TaskMemoryTool(memory)
    hits = call(tool, "search", query="west", namespace=stored["table"], limit=10)
    assert sorted(h["position"]["row"] for h in hits) == [i for i, r in enumerate(ROWS) if r["region"] == "west"]
    everywhere = call(tool, "search", query="west glaciers", limit=20)
    assert {h["namespace"] for h in everywhere} == {stored["table"], stored["text"]}
    assert call(tool, "search", query="anything", namespace=stored["blob"]) == []  # binary: nothing to search


def test_long_text_is_searched_in_passages(memory: TaskMemory) -> None:
    lines = [f"line {n} filler words here" for n in range(400)]
    lines[317] = "line 317 the needle is here"
    text = "\n".join(lines)
    ns = memory.store(TextArtifact(value=text), tool="T").namespace
    [hit] = call(TaskMemoryTool(memory), "search", query="needle", namespace=ns, limit=1)
    assert len(hit["passage"]) <= PASSAGE_TARGET + 1
    assert "needle" in text[hit["position"]["offset"]:hit["position"]["end"]]


# -- summarize and query (sub-prompts to the model) ------------------------------------------------


def _contents(server: StubServer) -> list[str]:
    return [r["body"]["messages"][-1]["content"] for r in server.requests]


def test_summarize_sends_the_whole_text_once(
    stored: dict[str, str], memory: TaskMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-task-memory")
    summary = "Ten paragraphs about nature."
    with StubServer(openai_text_reply(summary)) as server:
        driver = create_driver("openai:m", base_url=server.url)
        tool = TaskMemoryTool(memory, driver=driver)
        out = call(tool, "summarize", namespace=stored["text"])
    assert out == {"namespace": stored["text"], "answer": summary, "chunks": 1, "requests": 1}
    [content] = _contents(server)
    assert TEXT in content


def test_query_chunks_a_text_bigger_than_the_context_window(stored: dict[str, str], memory: TaskMemory,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-task-memory")
    window = 600  # tokens: the stored text is several times bigger
    assert estimate_text(TEXT) > 2 * window
    question = "Which paragraph is about geysers?"
    with StubServer(*[openai_text_reply(f"fact {n}") for n in range(60)]) as server:
        driver = create_driver("openai:m", base_url=server.url)
        tool = TaskMemoryTool(memory, driver=driver, context_window=window)
        out = call(tool, "query", namespace=stored["text"], question=question)
    contents = _contents(server)
    *maps, combine = contents
    chunks = [re.search(r"<<<\n(.*)\n>>>", c, re.S).group(1) for c in maps]
    assert len(maps) > 3 and out["chunks"] == len(maps) and out["requests"] == len(contents)
    assert "".join(chunks) == TEXT  # every character asked about once, in order
    for content in contents:  # each request fits the window (our estimate), question included
        assert question in content
        assert len(content) // CHARS_PER_TOKEN < window
    assert all(f"part {n} of {len(maps)}" in c for n, c in enumerate(maps, 1))
    for n in range(len(maps)):  # each part's answer reaches the combining request
        assert f"From part {n + 1}: fact {n}" in combine
    assert out["answer"] == f"fact {len(maps)}"


def test_query_errors_reach_the_model(stored: dict[str, str], memory: TaskMemory) -> None:
    no_driver = call(TaskMemoryTool(memory), "query", namespace=stored["text"], question="why?")
    assert isinstance(no_driver, ErrorArtifact) and "no model" in no_driver.value
    binary = call(TaskMemoryTool(memory, driver=object()), "query", namespace=stored["blob"], question="why?")
    assert isinstance(binary, ErrorArtifact) and "binary" in binary.value


def test_a_catastrophic_regex_from_the_model_is_stopped_not_run_forever(monkeypatch):
    """`(a|aa)*b` over a run of a's backtracks exponentially; the model chose it, so it must stop:
    the search passes its time limit to the `regex` module and says so when it is reached."""
    from ipyagent.memory import reading

    memory = TaskMemory()
    memory.store(TextArtifact(value="a" * 40), tool="T", activity="fetch")
    for pattern in ("(a|aa)*b", "(a*)*b", "(a+a+)+b"):  # each froze stdlib `re` for seconds (40 a's: ~38 s)
        assert reading.search(memory.entries(), pattern, regex=True) == []  # `regex` sees through these
    assert reading.search(memory.entries(), "a{3}", regex=True)  # an ordinary pattern still works
    assert reading.REGEX_TIMEOUT == 1

    # One `regex` does backtrack on: seconds for 22 a's, doubling with each more. Its search is cut at
    # the limit (read here at 10 ms), not run out: without the limit it ends, empty, seconds later.
    monkeypatch.setattr(reading, "REGEX_TIMEOUT", 0.01)
    memory.store(TextArtifact(value="a" * 22 + "!"), tool="T", activity="fetch")
    with pytest.raises(ValueError, match=r"the regex '\^\(a\|a\)\+\$' took longer than 0.01 s; use a simpler pattern"):
        reading.search(memory.entries(), "^(a|a)+$", regex=True)
