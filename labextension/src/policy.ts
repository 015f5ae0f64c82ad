/**
 * What is drawn, from the one policy file the Python renderer reads too
 * (src/ipyagent/notebook/render/policy.json, read by render/policy.py): the sanitizer's
 * allowlist (tags, attributes per tag, style properties, URL schemes), the inline-image and
 * link rules, and the evaluation matrix's page size and summary columns.
 */

import policy from '../../src/ipyagent/notebook/render/policy.json';

export const POLICY = policy;

export const ALLOWED_TAGS: string[] = policy.sanitizer.tags;
/** The attributes kept, per tag. */
export const ALLOWED_ATTRIBUTES: { [tag: string]: string[] } = policy.sanitizer.attributes;
/** The properties kept of a `style` attribute (markdown-it's table alignment). */
export const STYLE_PROPERTIES: string[] = policy.sanitizer.style_properties;
/** Schemes a link may have (a relative URL has none and is kept). */
export const URL_SCHEMES: string[] = policy.sanitizer.url_schemes;
/** Image types drawn inline, from a base64 `data:` URL. */
export const RASTER_TYPES: ReadonlySet<string> = new Set(policy.images.raster_types);
/** Audio types a tool's card plays, from a base64 `data:` URL. */
export const AUDIO_TYPES: ReadonlySet<string> = new Set(policy.images.audio_types);
export const IMAGE_LINK_CLASS = policy.images.link_class;
export const IMAGE_LINK_LABEL = policy.images.link_label;
export const IMAGE_DEFAULT_ALT = policy.images.default_alt;
export const LINK_REL = policy.links.rel;
export const LINK_REFERRER_POLICY = policy.links.referrerpolicy;
/** Rows per page of an evaluation's matrix. */
export const EVALUATION_PAGE_ROWS = policy.evaluation.page_rows;
/** Characters of an answer's first line shown in a matrix cell. */
export const EVALUATION_FIRST_LINE = policy.evaluation.first_line_chars;
/** Characters of an answer a saved evaluation keeps (its preview). */
export const EVALUATION_PREVIEW = policy.evaluation.preview_chars;
/** (key of a summary row, column title) of an evaluation's summary table. */
export const EVALUATION_SUMMARY_COLUMNS: [string, string][] = policy.evaluation.summary_columns;
/** (key, column title) of every figure of a column, behind "details". */
export const EVALUATION_SUMMARY_DETAILS: [string, string][] = policy.evaluation.summary_details_columns;

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}

/** The only images drawn: a `data:` URL of a raster type (no SVG, which may reference other resources). */
export const INLINE_IMAGE = new RegExp(
  `^data:(?:${policy.images.raster_types.map(escapeRegExp).join('|')});base64,[a-z0-9+/=\\s]*$`,
  'i'
);

/** A URL a link may keep: one of URL_SCHEMES, or relative (no `scheme:` at its start). */
export const SAFE_URL = new RegExp(
  `^(?:(?:${URL_SCHEMES.map(escapeRegExp).join('|')}):|(?![a-z][a-z0-9+.\\-]*:))`,
  'i'
);

/** Whether a link may point to `url`, once ASCII white space and control characters are out of it
 * (as a browser drops them). */
export function safeUrl(url: string): boolean {
  // eslint-disable-next-line no-control-regex
  return SAFE_URL.test(url.replace(/[\u0000-\u0020\u007f]/g, ''));
}
