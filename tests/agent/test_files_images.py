"""Files in (PDFs and text documents, per provider, refused where a model cannot take them) and
images out (Gemini inline image parts, Responses image generation results) as `result.images`
and as an ``<img>`` in the saved transcript.

Request shapes follow each API reference: OpenAI "File inputs" (Chat ``file`` parts,
Responses ``input_file``), Anthropic "PDF support" (``document`` blocks, base64 or text
sources), Gemini "Document understanding" (``inlineData`` with ``application/pdf``).
"""

from __future__ import annotations

import base64
import json
import re

import pytest

import ipyagent
from ipyagent.agent.inputs.files import document_block
from ipyagent.agent import transcript_of
from ipyagent.notebook.render.transcript import to_html

from ..support.stub_server import Reply, StubServer
from ..support.replies import MODELS, REPLIES

PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
PDF64 = base64.b64encode(PDF).decode()
PNG64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


@pytest.fixture
def files(tmp_path):
    (tmp_path / "report.pdf").write_bytes(PDF)
    (tmp_path / "notes.md").write_text("# Notes\nrevenue grew 12%\n")
    (tmp_path / "photo.bmp").write_bytes(b"BM....")
    return tmp_path


def test_documents_from_paths_and_bytes(files):
    pdf = document_block(files / "report.pdf")
    assert pdf.is_pdf and pdf.data == PDF64 and pdf.name == "report.pdf"
    notes = document_block(str(files / "notes.md"))
    assert notes.mime_type == "text/markdown" and notes.text.startswith("# Notes") and notes.data is None
    assert document_block(PDF).is_pdf and document_block(b"plain words").text == "plain words"
    with pytest.raises(ValueError, match="not a PDF or a text document"):
        document_block(files / "photo.bmp")
    with pytest.raises(FileNotFoundError):
        document_block(files / "missing.pdf")
    with pytest.raises(ValueError, match="not UTF-8"):
        document_block(b"\xff\xfe\x00binary")


def _user_content(provider: str, body: dict):
    if provider == "gemini":
        return body["contents"][-1]["parts"]
    if provider == "openai-responses":
        return body["input"][-1]["content"]
    return body["messages"][-1]["content"]


@pytest.mark.parametrize(
    "provider, expected",
    [
        (
            "openai",
            {"type": "file", "file": {"filename": "report.pdf", "file_data": f"data:application/pdf;base64,{PDF64}"}},
        ),
        (
            "openai-responses",
            {"type": "input_file", "filename": "report.pdf", "file_data": f"data:application/pdf;base64,{PDF64}"},
        ),
        (
            "anthropic",
            {
                "type": "document",
                "source": {"type": "base64", "media_type": "application/pdf", "data": PDF64},
                "title": "report.pdf",
                "citations": {"enabled": True},
            },
        ),  # --file documents cite ("Citations")
        ("gemini", {"inlineData": {"mimeType": "application/pdf", "data": PDF64}}),
    ],
)
def test_a_pdf_reaches_each_provider_in_its_format(provider, expected, files):
    with StubServer(REPLIES[provider]()) as server:
        result = ipyagent.Agent(f"{provider}:{MODELS[provider]}", base_url=server.url).run(
            "Summarize", files=[files / "report.pdf"]
        )
    assert result.ok, result.error
    assert expected in _user_content(provider, server.requests[0]["body"])


def test_a_text_document_goes_as_text_or_a_text_document(files):
    with StubServer(REPLIES["anthropic"]()) as server:
        ipyagent.Agent(f"anthropic:{MODELS['anthropic']}", base_url=server.url).run(
            "Summarize", files=files / "notes.md"
        )
    (document,) = [p for p in server.requests[0]["body"]["messages"][-1]["content"] if p["type"] == "document"]
    assert document["source"] == {"type": "text", "media_type": "text/plain", "data": "# Notes\nrevenue grew 12%\n"}
    with StubServer(REPLIES["ollama"]()) as server:
        ipyagent.Agent(f"ollama:{MODELS['ollama']}", base_url=server.url).run("Summarize", files=files / "notes.md")
    content = server.requests[0]["body"]["messages"][-1]["content"]
    assert content.startswith("Summarize\n\n<document name='notes.md'>\n# Notes") and "revenue grew 12%" in content


@pytest.mark.parametrize("provider, model", [("ollama", "qwen3"), ("gemini", "gemma-3-27b-it")])
def test_a_pdf_is_refused_before_sending_where_the_model_cannot_take_it(provider, model, files):
    with StubServer(REPLIES[provider]()) as server:
        result = ipyagent.Agent(f"{provider}:{model}", base_url=server.url).run("Summarize", files=files / "report.pdf")
    assert server.requests == []
    assert (
        result.error.type == "unsupported_capability" and result.error.code == "pdf" and model in result.error.message
    )


def test_file_option_on_agent_and_compare(ip, files, capsys):
    with StubServer(REPLIES["openai"]()) as server:
        ip.run_line_magic("provider", f"openai:m --base-url {server.url}")
        ip.user_ns["doc"] = PDF
        ip.run_cell_magic("agent", f"--file {files / 'notes.md'} --file doc", "Summarize")
        ip.run_cell_magic("compare", "openai:m openai:n --file doc", "Summarize")
        with pytest.raises(Exception, match="--file nope.pdf: no file"):
            ip.run_cell_magic("agent", "--file nope.pdf", "Summarize")
    content = server.requests[0]["body"]["messages"][-1]["content"]
    assert content[0]["text"] == "Summarize" and "<document name='notes.md'>" in content[1]["text"]
    assert content[2] == {
        "type": "file",
        "file": {"filename": "document.pdf", "file_data": f"data:application/pdf;base64,{PDF64}"},
    }
    assert all(r["body"]["messages"][-1]["content"][-1]["type"] == "file" for r in server.requests[1:3])


# -- images out --------------------------------------------------------------------------------

GEMINI_IMAGE = Reply(pieces=[b"data: " + json.dumps({
    "candidates": [{"content": {"role": "model", "parts": [{"text": "Here is a red dot."},
                                                           {"inlineData": {"mimeType": "image/png", "data": PNG64}}]},
                    "finishReason": "STOP", "index": 0}],
    "usageMetadata": {"promptTokenCount": 6, "candidatesTokenCount": 1290, "totalTokenCount": 1296},
    "modelVersion": "gemini-2.5-flash-image", "responseId": "img-1"}).encode() + b"\r\n\r\n"])

_ITEM = {"id": "ig_1", "type": "image_generation_call", "status": "completed", "output_format": "png", "result": PNG64}
_RESPONSE = {"id": "resp_1", "object": "response", "model": "gpt-4.1-mini", "status": "completed", "output": [_ITEM],
             "usage": {"input_tokens": 9, "output_tokens": 40, "total_tokens": 49}}
RESPONSES_IMAGE = Reply(
    pieces=[
        f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode()
        for e in (
            {
                "type": "response.created",
                "sequence_number": 0,
                "response": {**_RESPONSE, "status": "in_progress", "output": []},
            },
            {
                "type": "response.output_item.added",
                "sequence_number": 1,
                "output_index": 0,
                "item": {**_ITEM, "status": "in_progress", "result": None},
            },
            {"type": "response.output_item.done", "sequence_number": 2, "output_index": 0, "item": _ITEM},
            {"type": "response.completed", "sequence_number": 3, "response": _RESPONSE},
        )
    ]
)


@pytest.mark.parametrize("provider, model, reply", [
    ("gemini", "gemini-2.5-flash-image", GEMINI_IMAGE), ("openai-responses", "gpt-4.1-mini", RESPONSES_IMAGE),
])
def test_returned_images_are_result_images_and_img_in_the_transcript(provider, model, reply):
    with StubServer(reply) as server:
        result = ipyagent.Agent(f"{provider}:{model}", base_url=server.url).run("Draw a red dot")
    assert result.ok, result.error
    (image,) = result.images
    assert image.mime_type == "image/png" and image.data == PNG64
    html = to_html(transcript_of(result))
    assert re.search(rf'<img [^>]*src="data:image/png;base64,{re.escape(PNG64)}"', html)


def test_a_returned_image_is_an_img_in_the_saved_notebook(monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    with StubServer(GEMINI_IMAGE) as server:
        monkeypatch.setenv("GEMINI_API_KEY", "gemini-test-image")
        monkeypatch.setenv("GEMINI_BASE_URL", server.url)
        nb = nbformat.v4.new_notebook(
            cells=[
                nbformat.v4.new_code_cell("%load_ext ipyagent\n%provider gemini:gemini-2.5-flash-image"),
                nbformat.v4.new_code_cell("%%agent\nDraw a red dot"),
            ]
        )
        NotebookClient(nb, timeout=60, kernel_name="python3", store_widget_state=True).execute()
    outputs = [o for o in nb.cells[1].outputs if "application/vnd.ipyagent.transcript+json" in o.get("data", {})]
    (saved,) = outputs
    assert f'src="data:image/png;base64,{PNG64}"' in saved["data"]["text/html"]
    parts = saved["data"]["application/vnd.ipyagent.transcript+json"]["messages"][-1]["parts"]
    assert {"type": "other", "kind": "image", "mime_type": "image/png", "data": PNG64} .items() <= parts[-1].items()
