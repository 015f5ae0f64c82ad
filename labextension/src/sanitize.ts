/**
 * Model HTML -> safe HTML with DOMPurify, on the same rules as the Python side
 * (src/ipyagent/notebook/render/html.py): the same tag and attribute allowlist, links
 * to http, https and mailto only, and only `text-align` kept of a style.
 *
 * Rendering never loads anything from outside (inert.ts has the rules): an image
 * whose source is not a `data:` raster image becomes a link to it; links open in
 * a new tab with rel="noopener noreferrer nofollow" and referrerpolicy="no-referrer".
 * DOMPurify parses in a document of its own (nothing loads there), and the result
 * passes inert.ts's <template> pass before it reaches the page.
 */

import DOMPurify from 'dompurify';

import { IMAGE_LINK_CLASS, INLINE_IMAGE, LINK_REL, inertFragment } from './inert';

/** render.py ALLOWED_TAGS. */
export const ALLOWED_TAGS = [
  'a', 'abbr', 'b', 'blockquote', 'br', 'code', 'del', 'details', 'div', 'em', 'h1', 'h2', 'h3',
  'h4', 'h5', 'h6', 'hr', 'i', 'img', 'kbd', 'li', 'ol', 'p', 'pre', 's', 'span', 'strong',
  'sub', 'summary', 'sup', 'table', 'tbody', 'td', 'th', 'thead', 'tr', 'ul'
];

/** render.py ALLOWED_ATTRIBUTES, per tag. */
const ATTRIBUTES: { [tag: string]: string[] } = {
  a: ['href', 'title', 'class'],
  img: ['src', 'alt', 'title'],
  code: ['class'],
  span: ['class'],
  div: ['class'],
  details: ['open', 'class'],
  td: ['align', 'style'],
  th: ['align', 'style'],
  ol: ['start']
};

const ALL_ATTRIBUTES = [...new Set(Object.values(ATTRIBUTES).flat())];
const SAFE_URL = /^(?:(?:https?|mailto):|[^a-z:]*(?:[/?#]|$))/i;
const ALIGN = /^\s*text-align\s*:\s*(left|right|center|justify)\s*;?\s*$/i;

let purifier: ReturnType<typeof DOMPurify> | null = null;

function setUp(): ReturnType<typeof DOMPurify> {
  const purify = DOMPurify(window);
  purify.addHook('uponSanitizeAttribute', (node, data) => {
    const tag = node.nodeName.toLowerCase();
    if (!(ATTRIBUTES[tag] || []).includes(data.attrName)) {
      data.keepAttr = false;
    } else if (data.attrName === 'style') {
      const m = ALIGN.exec(data.attrValue);
      data.attrValue = m ? `text-align: ${m[1].toLowerCase()}` : '';
      data.keepAttr = !!m;
    } else if (data.attrName === 'href' && !SAFE_URL.test(data.attrValue.trim())) {
      data.keepAttr = false;
    }
  });
  purify.addHook('afterSanitizeAttributes', node => {
    if (node.nodeName === 'A') {
      node.setAttribute('rel', LINK_REL);
      node.setAttribute('referrerpolicy', 'no-referrer');
      node.setAttribute('target', '_blank');
    } else if (node.nodeName === 'IMG') {
      const src = (node.getAttribute('src') || '').trim();
      if (!INLINE_IMAGE.test(src)) {
        node.replaceWith(imageLink(node.ownerDocument, src, node.getAttribute('alt') || ''));
      } else {
        node.setAttribute('referrerpolicy', 'no-referrer');
      }
    }
  });
  return purify;
}

/** What stands for an image that would load from outside: a link to it (never fetched). */
function imageLink(doc: Document, src: string, alt: string): Node {
  const label = `🖼 ${alt || 'image'}`;
  if (!/^https?:/i.test(src)) {
    return doc.createTextNode(label);
  }
  const a = doc.createElement('a');
  a.href = src;
  a.textContent = label;
  a.className = IMAGE_LINK_CLASS;
  a.setAttribute('rel', LINK_REL);
  a.setAttribute('referrerpolicy', 'no-referrer');
  a.setAttribute('target', '_blank');
  return a;
}

/** Sanitize an HTML fragment into a string (DOMPurify, render.py's allowlist). */
export function sanitize(html: string): string {
  purifier = purifier || setUp();
  return purifier.sanitize(html, {
    ALLOWED_TAGS,
    ALLOWED_ATTR: [...ALL_ATTRIBUTES, 'rel', 'referrerpolicy', 'target'],
    ALLOW_DATA_ATTR: false,
    ALLOWED_URI_REGEXP: /^(?:(?:https?|mailto):|data:image\/|[^a-z:]*(?:[/?#]|$))/i
  }) as string;
}

/** Sanitize an HTML fragment, then make it inert (inert.ts), as a document fragment. */
export function sanitizeToFragment(html: string): DocumentFragment {
  return inertFragment(sanitize(html));
}
