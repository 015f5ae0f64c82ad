"""A tool's result as a model is sent it: through the one redactor's context rule.

A tool reads files, environments, configs and servers (an MCP resource is a tool's
result too), so what it returns can hold a key. Before a result enters the
conversation its text passes `core.redact_context` (secrets in play, values under
secret-looking names), a JSON value first `core.mask_named`; images, audio and
blobs are kept as they are. The session's ``redact_context=false`` turns it off
(`RunOptions.redact_context`).
"""

from __future__ import annotations

from ..core import BaseArtifact, ListArtifact, mask_named, redact_context, redact_data


def context_safe(artifact: BaseArtifact) -> BaseArtifact:
    """`artifact` with its secrets masked, as a copy when something changed (else itself)."""
    value = getattr(artifact, "value", None)
    if isinstance(artifact, ListArtifact):
        items = [context_safe(item) for item in artifact.value]
        changed = any(new is not old for new, old in zip(items, artifact.value))
        return artifact.model_copy(update={"value": items}) if changed else artifact
    if isinstance(value, str):
        text, masked = redact_context(value)
        return artifact.model_copy(update={"value": text}) if masked else artifact
    if artifact.type in ("json", "table") and value is not None:
        named, count = mask_named(value)
        cleaned = redact_data(named)
        return artifact.model_copy(update={"value": cleaned}) if count or cleaned != value else artifact
    return artifact
