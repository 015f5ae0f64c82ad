"""Google Gemini `streamGenerateContent` over SSE: the prompt driver and its public names.

Follows the Gemini API reference, "Generating content" (`POST
/v1beta/models/{model}:streamGenerateContent?alt=sse`, request `Content` /
`Part` / `Tool` / `GenerationConfig`, response `GenerateContentResponse`), the
"Function calling", "Thought signatures", "Thinking" and "Structured output"
guides, and the `google.rpc.Status` error model. The API key travels in the
``x-goog-api-key`` header, never in the URL.

Translation notes:

* Roles are ``user`` / ``model``; system messages are joined into
  ``systemInstruction``; tool results are ``functionResponse`` parts in a
  ``user`` content (all results of one step in one content).
* Gemini sends each ``functionCall`` whole (``{name, args}``) and gives no call
  id: a call gets ``call_<content index>_<responseId>`` (``call_<index>`` when
  the response has no id) unless its part has an ``id``; made-up ids are not
  sent back. The Vertex AI form with streamed arguments (``willContinue`` /
  ``partialArgs`` with a ``jsonPath``, closed by an empty ``functionCall``) is
  assembled here.
* A ``thoughtSignature`` must go back unchanged on the same part. On a
  function call it rides on the `ActionCallBlock`; on a thought part on its
  `ReasoningBlock`; on a plain text part (often an empty text part at the end
  of a Gemini 3 stream) it becomes a signature-only `ReasoningBlock` (empty
  text, sent whole as a `BlockDelta`) placed just before the text it came
  with, and is put back on that text part (or on an empty text part) next turn.
* Tool parameter schemas are rewritten to Gemini's OpenAPI-3.0 `Schema`
  subset (see `to_gemini_schema`); the output schema goes as
  ``responseJsonSchema``, which takes JSON Schema as it is.
* An error object inside the stream (a ``data:`` payload, or a bare JSON
  object written without ``data:`` as the API and its SDKs do) raises
  `ProviderError`.
"""

from .driver import GeminiPromptDriver
from .errors import REASON_TYPES, STATUS_TYPES, error_reason, error_type, parse_duration, retry_delay, stream_error
from .request import PART_KEYS, TOOL_MODES, GeminiRequest
from .response import FINISH_REASONS, GeminiResponseParser, is_sent_id, parse_response, usage_from_gemini
from .schema import to_gemini_schema
from .stream import GeminiDecoder

__all__ = [
    "FINISH_REASONS", "PART_KEYS", "REASON_TYPES", "STATUS_TYPES", "TOOL_MODES", "GeminiDecoder", "GeminiPromptDriver",
    "GeminiRequest", "GeminiResponseParser", "error_reason", "error_type", "is_sent_id", "parse_duration",
    "parse_response", "retry_delay", "stream_error", "to_gemini_schema", "usage_from_gemini",
]
