"""What is drawn, read from ``policy.json`` beside this module: the one source of the sanitizer's
allowlist (tags, attributes per tag, style properties, URL schemes), the inline-image and link
rules, and the evaluation matrix's page size and summary columns. The labextension's TypeScript
imports the same file (``labextension/src/policy.ts``), so the two renderers cannot drift apart.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

#: The whole policy document (plain JSON data).
POLICY: dict[str, Any] = json.loads(Path(__file__).with_name("policy.json").read_text(encoding="utf-8"))

_SANITIZER = POLICY["sanitizer"]
_IMAGES = POLICY["images"]
_EVALUATION = POLICY["evaluation"]

ALLOWED_TAGS: frozenset[str] = frozenset(_SANITIZER["tags"])
ALLOWED_ATTRIBUTES: dict[str, frozenset[str]] = {
    tag: frozenset(names) for tag, names in _SANITIZER["attributes"].items()
}
STYLE_PROPERTIES: frozenset[str] = frozenset(_SANITIZER["style_properties"])
#: Schemes a link may have (a relative URL has none and is kept).
URL_SCHEMES: frozenset[str] = frozenset(_SANITIZER["url_schemes"])
#: Image types drawn inline (from a base64 ``data:`` URL).
RASTER_TYPES: frozenset[str] = frozenset(_IMAGES["raster_types"])
#: A ``data:`` URL of an image drawn inline (matched whole, any case).
INLINE_IMAGE = re.compile(
    "data:(?:" + "|".join(re.escape(t) for t in _IMAGES["raster_types"]) + r");base64,[A-Za-z0-9+/=\s]*", re.I
)
#: Audio types a tool's card plays (from a base64 ``data:`` URL).
AUDIO_TYPES: frozenset[str] = frozenset(_IMAGES["audio_types"])
IMAGE_LINK_CLASS: str = _IMAGES["link_class"]
IMAGE_LINK_LABEL: str = _IMAGES["link_label"]
IMAGE_DEFAULT_ALT: str = _IMAGES["default_alt"]
LINK_REL: str = POLICY["links"]["rel"]
LINK_REFERRER_POLICY: str = POLICY["links"]["referrerpolicy"]
#: A URL a link may keep, once ASCII white space and control characters are out of it (a browser
#: drops them too): one of `URL_SCHEMES`, or relative (no ``scheme:`` at its start).
SAFE_URL = re.compile(r"(?:" + "|".join(sorted(URL_SCHEMES)) + r"):|(?![a-z][a-z0-9+.\-]*:)", re.I)
_URL_NOISE = re.compile(r"[\x00-\x20\x7f]")


def safe_url(url: str) -> bool:
    """Whether a link may point to `url` (`SAFE_URL`)."""
    return SAFE_URL.match(_URL_NOISE.sub("", url)) is not None

#: Rows per page of an evaluation's matrix.
EVALUATION_PAGE_ROWS: int = _EVALUATION["page_rows"]
#: Characters of an answer's first line shown in a matrix cell.
EVALUATION_FIRST_LINE: int = _EVALUATION["first_line_chars"]
#: Characters of an answer a saved evaluation keeps (its preview).
EVALUATION_PREVIEW: int = _EVALUATION["preview_chars"]
#: (key of a summary dict, column title) of an evaluation's summary table.
EVALUATION_SUMMARY_COLUMNS: tuple[tuple[str, str], ...] = tuple(
    (key, title) for key, title in _EVALUATION["summary_columns"]
)
#: (key, column title) of the whole summary, behind "details" (every figure of a column).
EVALUATION_SUMMARY_DETAILS: tuple[tuple[str, str], ...] = tuple(
    (key, title) for key, title in _EVALUATION["summary_details_columns"]
)
