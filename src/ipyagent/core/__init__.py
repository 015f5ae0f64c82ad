"""The provider-neutral core: artifacts, content blocks, messages, PromptStack, events, errors.

Imports pydantic only (DESIGN.md layer rule). Every model is declared with ``defer_build=True``:
its validator and serializer are built when first used, not when ``%load_ext`` or a first
``%provider`` imports the core (benchmarks/import_load.py).
"""

from .artifacts import (
    ActionArtifact,
    Artifact,
    AudioArtifact,
    BaseArtifact,
    BlobArtifact,
    ErrorArtifact,
    GenericArtifact,
    ImageArtifact,
    InfoArtifact,
    JsonArtifact,
    ListArtifact,
    MEDIA_TYPES,
    TableArtifact,
    TextArtifact,
    flatten,
    split_media,
)
from .content import (
    BUILTIN_TOOLS,
    ActionCallBlock,
    ActionResultBlock,
    AudioBlock,
    Citation,
    ServerToolCallBlock,
    ServerToolResultBlock,
    WebSource,
    ContentBlock,
    DocumentBlock,
    GenericBlock,
    ImageBlock,
    ReasoningBlock,
    TextBlock,
    MAX_ARGUMENT_CHARS,
    MAX_ARGUMENT_DEPTH,
    join_text,
    parse_arguments,
)
from .errors import ConfigurationError, ProviderError
from .events import (
    ArtifactStored,
    BlockDelta,
    CitationDelta,
    DeltaMessage,
    Event,
    EventHandler,
    HistoryTrimmed,
    ModelCompleted,
    ModelFailed,
    ModelStarted,
    PartialReply,
    ReasoningDelta,
    RetryScheduled,
    ServerToolDelta,
    TextDelta,
    SamplingCompleted,
    ToolCallCompleted,
    ToolCallDelta,
    ToolCallNote,
    ToolCallProgress,
    reply_so_far,
)
from .interaction import (
    ElicitationAnswer,
    ElicitationRequest,
    FormField,
    SamplingAnswer,
    SamplingRequest,
    SamplingVerdict,
    form_fields,
    read_form,
)
from .messages import MESSAGE_FIELDS, Message, MessageError, MessageStatus, StopKind, StopReason, Usage
from .system import SystemBlock, fit_system_blocks, system_blocks, system_text
from .settings import ModelSettings, coerce_settings, unsupported_setting
from .figures import comparison_footer, footer_figures, format_usd, masked_figure, plural, provider_title
from .prompt_stack import BuiltinTool, OutputStrategy, PromptStack, ToolDefinition, to_blocks
from .tool_action import MAX_NATIVE_NAME, ToolAction, ToolNameError, from_native_name, to_native_name
from .controls import visible_controls
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
    secret_name,
)
from .._lazy import lazy_exports

__all__ = [name for name in dir() if not name.startswith("_") and name != "lazy_exports"]

#: The saved transcript's model (loaded on first use: the notebook layer and `%agent` history need it).
__getattr__ = lazy_exports(
    __name__,
    {
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
__all__ += list(__getattr__.exports)
