/**
 * Inert model output: rendering model or tool text never loads anything.
 *
 * The same rules as the Python side (src/ipyagent/notebook/render/html.py):
 * - an image is drawn only from a `data:` URL of a raster type (INLINE_IMAGE);
 *   any other image (remote, protocol-relative `//host/…`, same-origin
 *   `/api/…`, relative) becomes a link showing its alt text, fetched only if
 *   clicked;
 * - every link gets `rel="noopener noreferrer nofollow"` and
 *   `referrerpolicy="no-referrer"`.
 *
 * `inertMarkdown` applies them while Markdown renders; `inertFragment` applies
 * them again to sanitized HTML, parsed in an inert <template> (nothing in it
 * loads) before any node reaches the page.
 */

import type MarkdownIt from 'markdown-it';

/** The only images drawn: inline raster data (no SVG, which may reference other resources). */
export const INLINE_IMAGE = /^data:image\/(?:png|jpe?g|gif|webp);base64,[a-z0-9+/=\s]*$/i;
export const LINK_REL = 'noopener noreferrer nofollow';
export const IMAGE_LINK_CLASS = 'ipyagent-image-link';

/** Make `md` render images from anything but inline raster data as links; returns `md`. */
export function inertMarkdown(md: MarkdownIt): MarkdownIt {
  const image = md.renderer.rules.image!;
  md.renderer.rules.image = (tokens, idx, options, env, self) => {
    const token = tokens[idx];
    const src = token.attrGet('src') || '';
    if (INLINE_IMAGE.test(src)) {
      return image(tokens, idx, options, env, self);
    }
    const alt = self.renderInlineAsText(token.children || [], options, env) || 'image';
    const esc = md.utils.escapeHtml;
    return `<a href="${esc(src)}" class="${IMAGE_LINK_CLASS}">🖼 ${esc(alt)}</a>`;
  };
  return md;
}

/** A link element to `href` showing `text`, with the link rules applied. */
function imageLink(doc: Document, href: string, text: string): HTMLAnchorElement {
  const a = doc.createElement('a');
  a.className = IMAGE_LINK_CLASS;
  a.textContent = `🖼 ${text || 'image'}`;
  if (href) {
    a.setAttribute('href', href);
  }
  return a;
}

/**
 * Sanitized `html` as a fragment where no image loads and links send no referrer.
 *
 * Parsing happens in a <template>, whose content is inert: an <img> there is
 * never fetched, so a remote one is replaced before it reaches the page.
 */
export function inertFragment(html: string): DocumentFragment {
  const template = document.createElement('template');
  template.innerHTML = html;
  const root = template.content;
  root.querySelectorAll('img').forEach(img => {
    const src = img.getAttribute('src') || '';
    img.removeAttribute('srcset');
    if (!INLINE_IMAGE.test(src)) {
      img.replaceWith(imageLink(template.content.ownerDocument, src, img.getAttribute('alt') || ''));
    }
  });
  // Anything else that may fetch on its own (sanitizers normally drop these already).
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
    const href = a.getAttribute('href') || '';
    if (/^\s*(javascript|vbscript|data|file):/i.test(href)) {
      a.removeAttribute('href');
    }
    a.setAttribute('rel', LINK_REL);
    a.setAttribute('referrerpolicy', 'no-referrer');
    a.setAttribute('target', '_blank');
  });
  return root;
}
