"""The provider-neutral core: artifacts, content blocks, messages, PromptStack, events, errors.

Imports pydantic only (DESIGN.md layer rule).
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
    TableArtifact,
    TextArtifact,
)
from .content import (
    ActionCallBlock,
    ActionResultBlock,
    AudioBlock,
    ContentBlock,
    DocumentBlock,
    GenericBlock,
    ImageBlock,
    ReasoningBlock,
    TextBlock,
    parse_arguments,
)
from .errors import ConfigurationError, ProviderError
from .events import (
    ArtifactStored,
    BlockDelta,
    DeltaMessage,
    Event,
    HistoryTrimmed,
    ModelCompleted,
    ModelFailed,
    ModelStarted,
    ReasoningDelta,
    TextDelta,
    ToolCallCompleted,
    ToolCallDelta,
)
from .messages import Message, StopKind, StopReason, Usage
from .system import SystemBlock, fit_system_blocks, system_blocks, system_text
from .settings import ModelSettings, coerce_settings, unsupported_setting
from .prompt_stack import OutputStrategy, PromptStack, ToolDefinition, to_blocks
from .tool_action import ToolAction, ToolNameError, from_native_name, to_native_name

__all__ = [name for name in dir() if not name.startswith("_")]
