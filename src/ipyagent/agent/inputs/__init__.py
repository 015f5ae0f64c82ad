"""A user message's attachments: documents and images as content blocks."""
