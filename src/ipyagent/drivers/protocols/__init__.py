"""Prompt drivers, one module per wire protocol (and the local test servers speaking them)."""
