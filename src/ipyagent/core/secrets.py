"""Secrets from the environment, kept out of everything ipyagent writes (run store, transcripts)."""

from __future__ import annotations

import os
import re

#: Environment variables whose values are secrets: ``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``, ...
SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIALS?)$", re.I)


def env_secret_values() -> list[str]:
    """The values (8 characters or more) of secret-named environment variables, longest first,
    so that a key containing another is replaced whole."""
    values = {v.strip() for k, v in os.environ.items() if SECRET_ENV.search(k) and len(v.strip()) >= 8}
    return sorted(values, key=len, reverse=True)


def replace_secrets(text: str, secrets: list[str], mask: str) -> str:
    for secret in secrets:
        text = text.replace(secret, mask)
    return text
