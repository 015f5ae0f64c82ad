"""The provider-neutral core: artifacts, content blocks, messages, PromptStack, events, errors.

Imports pydantic only (DESIGN.md layer rule). Every model is declared with ``defer_build=True``:
its validator and serializer are built when first used, not when ``%load_ext`` or a first
``%provider`` imports the core (benchmarks/import_load.py).
"""

from .errors import ConfigurationError, ProviderError
from .redact import (  # the one redactor; `redact` names the function, the module is `core.redact` in sys.modules
    MASK,
    SECRET_ENV,
    SECRET_FIELDS,
    StreamRedactor,
    add_secret,
    add_url,
    current_forms,
    mask_named,
    redact,
    redact_context,
    redact_data,
    redact_head,
    redact_json,
    redact_json_all,
    secret_name,
)
from .._lazy import lazy_exports

#: Everything else loads on first use: a first ``%provider`` needs the settings and the errors, not the
#: messages, artifacts, events and the saved transcript's models (benchmarks/import_load.py). `errors`
#: and `redact` load now: the function `redact` shares its module's name, which a lazy export cannot.
__getattr__ = lazy_exports(
    __name__,
    {
        "artifacts": (
            "ActionArtifact", "Artifact", "AudioArtifact", "BaseArtifact", "BlobArtifact", "ErrorArtifact",
            "GenericArtifact", "ImageArtifact", "InfoArtifact", "JsonArtifact", "ListArtifact", "MEDIA_TYPES",
            "TableArtifact", "TextArtifact", "flatten", "split_media",
        ),
        "content": (
            "BUILTIN_TOOLS", "ActionCallBlock", "ActionResultBlock", "AudioBlock", "Citation", "ServerToolCallBlock",
            "ServerToolResultBlock", "WebSource", "ContentBlock", "DocumentBlock", "GenericBlock", "ImageBlock",
            "ReasoningBlock", "TextBlock", "MAX_ARGUMENT_CHARS", "MAX_ARGUMENT_DEPTH", "join_text", "parse_arguments",
        ),
        "events": (
            "ArtifactStored", "BlockDelta", "CitationDelta", "DeltaMessage", "Event", "EventHandler",
            "HistoryTrimmed", "ModelCompleted", "ModelFailed", "ModelStarted", "PartialReply", "ReasoningDelta",
            "RetryScheduled", "ServerToolDelta", "TextDelta", "SamplingCompleted", "ToolCallCompleted",
            "ToolCallDelta", "ToolCallNote", "ToolCallProgress", "reply_so_far",
        ),
        "interaction": (
            "ElicitationAnswer", "ElicitationRequest", "FormField", "SamplingAnswer", "SamplingRequest",
            "SamplingVerdict", "form_fields", "read_form",
        ),
        "messages": (
            "MESSAGE_FIELDS", "Message", "MessageError", "MessageStatus", "StopKind", "StopReason", "Usage",
        ),
        "system": (
            "SystemBlock", "fit_system_blocks", "system_blocks", "system_text",
        ),
        "settings": (
            "ModelSettings", "coerce_settings", "unsupported_setting",
        ),
        "figures": (
            "comparison_footer", "footer_figures", "format_usd", "masked_figure", "plural", "provider_title",
        ),
        "prompt_stack": (
            "BuiltinTool", "OutputStrategy", "PromptStack", "ToolDefinition", "to_blocks",
        ),
        "tool_action": (
            "MAX_NATIVE_NAME", "ToolAction", "ToolNameError", "from_native_name", "to_native_name",
        ),
        "controls": (
            "visible_controls",
        ),
        "transcript": (
            "Transcript",
            "TranscriptMessage",
            "TranscriptUsage",
            "TranscriptCost",
            "TranscriptError",
            "Timings",
            "NextCell",
            "ArtifactSummary",
            "OtherPart",
            "ReasoningPart",
            "TextPart",
            "TranscriptCitation",
            "ServerToolPart",
            "ServerSource",
            "ToolCallPart",
            "ComparisonRecord",
            "ComparisonEntry",
            "ComparisonMark",
            "ComparisonTable",
            "MIME_TYPE",
            "COMPARISON_MIME_TYPE",
            "RASTER_TYPES",
            "STOPPED_WORDS",
            "RESULT_CHARS",
            "PREVIEW_CHARS",
            "MAX_IMAGE_CHARS",
            "transcript_messages",
            "MediaPart",
            "card_result",
            "AUDIO_TYPES",
            "MEDIA_CHARS",
            "ToolTiming",
        ),
    },
)
__all__ = [name for name in dir() if not name.startswith("_") and name != "lazy_exports"]
__all__ += list(__getattr__.exports)
