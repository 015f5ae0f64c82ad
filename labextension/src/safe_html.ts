/**
 * Untrusted HTML -> safe, inert DOM: the one place the labextension turns model, tool or server
 * output into HTML, on the policy the Python renderer applies (policy.ts, read from the same
 * policy.json as src/ipyagent/notebook/render/html.py).
 *
 * - `sanitize`: DOMPurify with the policy's tag and attribute allowlist; a link keeps its URL only
 *   when it is safe (one of the policy's schemes, or relative); a style keeps only the policy's
 *   properties.
 * - Rendering never loads anything from outside: an image is drawn only from a `data:` URL of a
 *   raster type (INLINE_IMAGE); any other image (remote, protocol-relative `//host/…`,
 *   same-origin `/api/…`, relative), in Markdown or in raw HTML, becomes `imageLink`: a link to
 *   it showing its alt text, fetched only if clicked. DOMPurify parses in a document of its own
 *   (nothing loads there).
 * - Every link gets rel="noopener noreferrer nofollow" and referrerpolicy="no-referrer", and
 *   opens in a new tab (never in place of JupyterLab).
 * - `sanitizeToFragment` parses the sanitized HTML in an inert <template> and applies the image
 *   and link rules once more before any node reaches the page.
 * - `inertMarkdown`: a markdown-it whose images all reach the sanitizer as <img>, so Markdown
 *   and raw HTML images take the same road to `imageLink`.
 */

import DOMPurify from 'dompurify';
import type MarkdownIt from 'markdown-it';

import {
  ALLOWED_ATTRIBUTES,
  ALLOWED_TAGS,
  IMAGE_DEFAULT_ALT,
  IMAGE_LINK_CLASS,
  IMAGE_LINK_LABEL,
  INLINE_IMAGE,
  LINK_REFERRER_POLICY,
  LINK_REL,
  STYLE_PROPERTIES,
  URL_SCHEMES,
  safeUrl
} from './policy';

const ALL_ATTRIBUTES = [...new Set(Object.values(ALLOWED_ATTRIBUTES).flat())];
/** DOMPurify's own URL check (after ours): a safe URL, or an image's data: URL (kept only when INLINE_IMAGE). */
const URI = new RegExp(`^(?:(?:${URL_SCHEMES.join('|')}):|data:image/|(?![a-z][a-z0-9+.\\-]*:))`, 'i');
/** A style declaration's value kept: keywords only. */
const STYLE_VALUE = /^[a-z-]+$/i;

/** The link rules, on `a`: no referrer, no opener, a new tab. */
function linkRules(a: Element): void {
  a.setAttribute('rel', LINK_REL);
  a.setAttribute('referrerpolicy', LINK_REFERRER_POLICY);
  a.setAttribute('target', '_blank');
}

/**
 * What stands for an image that would load from outside: a link to its source (kept only when
 * it is a safe URL) labelled "🖼 alt", with the link rules. The Python renderer's `image_link`
 * (render/html.py) writes the same element.
 */
export function imageLink(doc: Document, src: string, alt: string): HTMLAnchorElement {
  const a = doc.createElement('a');
  a.className = IMAGE_LINK_CLASS;
  a.textContent = IMAGE_LINK_LABEL + (alt || IMAGE_DEFAULT_ALT);
  if (src && safeUrl(src)) {
    a.setAttribute('href', src);
  }
  linkRules(a);
  return a;
}

/** The declarations of `style` whose property the policy keeps (`text-align: center`), or ''. */
export function keptStyle(style: string): string {
  return style
    .split(';')
    .map(declaration => declaration.split(':').map(s => s.trim()))
    .filter(([name, value, ...rest]) =>
      !rest.length && STYLE_PROPERTIES.includes((name || '').toLowerCase()) && STYLE_VALUE.test(value || '')
    )
    .map(([name, value]) => `${name.toLowerCase()}: ${value.toLowerCase()}`)
    .join('; ');
}

let purifier: ReturnType<typeof DOMPurify> | null = null;

function setUp(): ReturnType<typeof DOMPurify> {
  const purify = DOMPurify(window);
  purify.addHook('uponSanitizeAttribute', (node, data) => {
    const tag = node.nodeName.toLowerCase();
    if (!(ALLOWED_ATTRIBUTES[tag] || []).includes(data.attrName)) {
      data.keepAttr = false;
    } else if (data.attrName === 'style') {
      data.attrValue = keptStyle(data.attrValue);
      data.keepAttr = data.attrValue !== '';
    } else if (data.attrName === 'href' && !safeUrl(data.attrValue)) {
      data.keepAttr = false;
    }
  });
  purify.addHook('afterSanitizeAttributes', node => {
    if (node.nodeName === 'A') {
      linkRules(node);
    } else if (node.nodeName === 'IMG') {
      const src = (node.getAttribute('src') || '').trim();
      if (!INLINE_IMAGE.test(src)) {
        node.replaceWith(imageLink(node.ownerDocument, src, node.getAttribute('alt') || ''));
      }
    }
  });
  return purify;
}

/** Sanitize an HTML fragment into a string (DOMPurify on the policy; images made links). */
export function sanitize(html: string): string {
  purifier = purifier || setUp();
  return purifier.sanitize(html, {
    ALLOWED_TAGS,
    ALLOWED_ATTR: [...ALL_ATTRIBUTES, 'rel', 'referrerpolicy', 'target'],
    ALLOW_DATA_ATTR: false,
    ALLOWED_URI_REGEXP: URI
  }) as string;
}

/**
 * Sanitized `html` as a fragment where no image loads and links send no referrer.
 *
 * Parsing happens in a <template>, whose content is inert: an <img> there is never fetched, so
 * one the sanitizer let through would still be replaced before it reaches the page.
 */
export function sanitizeToFragment(html: string): DocumentFragment {
  const template = document.createElement('template');
  template.innerHTML = sanitize(html);
  const root = template.content;
  root.querySelectorAll('img').forEach(img => {
    const src = img.getAttribute('src') || '';
    img.removeAttribute('srcset');
    if (!INLINE_IMAGE.test(src)) {
      img.replaceWith(imageLink(root.ownerDocument, src, img.getAttribute('alt') || ''));
    }
  });
  // Anything else that may fetch on its own (the sanitizer drops these already).
  root.querySelectorAll('picture, source, video, audio, iframe, object, embed, link, style, input[type=image]')
    .forEach(node => node.remove());
  root.querySelectorAll('[background], [poster], [style]').forEach(node => {
    node.removeAttribute('background');
    node.removeAttribute('poster');
    const style = node.getAttribute('style') || '';
    if (/url\s*\(|@import|image-set/i.test(style)) {
      node.removeAttribute('style');
    }
  });
  root.querySelectorAll('a').forEach(a => {
    if (!safeUrl(a.getAttribute('href') || '')) {
      a.removeAttribute('href');
    }
    linkRules(a);
  });
  return root;
}

/** Make `md` write every image as a plain <img> (no other attribute), which the sanitizer turns
 * into `imageLink` unless it is inline raster data; returns `md`. */
export function inertMarkdown(md: MarkdownIt): MarkdownIt {
  md.renderer.rules.image = (tokens, idx, options, env, self) => {
    const token = tokens[idx];
    const esc = md.utils.escapeHtml;
    const alt = self.renderInlineAsText(token.children || [], options, env);
    return `<img src="${esc(token.attrGet('src') || '')}" alt="${esc(alt)}">`;
  };
  return md;
}
