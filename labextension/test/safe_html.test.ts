/**
 * safe_html.ts: the one imageLink, the policy's allowlist, and nothing that loads.
 *
 * The two image rules it replaced disagreed: sanitize.ts turned an image whose source was not
 * http(s) (protocol-relative `//host/…`, same-origin `/api/…`, relative, mailto:) into plain
 * text, while inert.ts and the Markdown rules (here and in Python) made it a link. The documented
 * rule (and Python's) is the link: every form of image source below reads the same in Markdown,
 * in raw HTML, and after the <template> pass.
 */

import './dom';

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { md } from '../src/markdown';
import { IMAGE_LINK_CLASS, INLINE_IMAGE, LINK_REL, POLICY, safeUrl } from '../src/policy';
import { imageLink, keptStyle, sanitize, sanitizeToFragment } from '../src/safe_html';

const PNG =
  'data:image/png;base64,' +
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

/** An image link as a plain record: what a person sees and where it leads. */
interface Link {
  href: string | null;
  text: string;
  rel: string | null;
  referrer: string | null;
  target: string | null;
}

function linkOf(a: Element): Link {
  assert.equal(a.tagName, 'A');
  assert.equal(a.className, IMAGE_LINK_CLASS);
  return {
    href: a.getAttribute('href'),
    text: a.textContent ?? '',
    rel: a.getAttribute('rel'),
    referrer: a.getAttribute('referrerpolicy'),
    target: a.getAttribute('target')
  };
}

function expected(href: string | null, alt = 'pic'): Link {
  return { href, text: `🖼 ${alt}`, rel: LINK_REL, referrer: 'no-referrer', target: '_blank' };
}

/** src -> the link's href (null: the source is not a safe URL, so the link leads nowhere). */
const SOURCES: [string, string | null][] = [
  ['http://evil.example/a.png?d=secret', 'http://evil.example/a.png?d=secret'],
  ['https://evil.example/a.png', 'https://evil.example/a.png'],
  ['//evil.example/p.png', '//evil.example/p.png'],
  ['/api/contents?x=1', '/api/contents?x=1'],
  ['rel/a.png', 'rel/a.png'],
  ['mailto:a@example.com', 'mailto:a@example.com'],
  ['javascript:alert(1)', null],
  ['java\tscript:alert(1)', null],
  ['data:text/html,<b>x</b>', null],
  ['data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=', null],
  ['', null]
];

describe('imageLink: every image but inline raster data becomes one link', () => {
  for (const [src, href] of SOURCES) {
    test(`raw HTML <img src=${JSON.stringify(src)}>`, () => {
      const fragment = sanitizeToFragment(`<p><img src="${src.replace(/"/g, '&quot;')}" alt="pic"></p>`);
      assert.equal(fragment.querySelectorAll('img').length, 0);
      assert.deepEqual(linkOf(fragment.querySelector('a')!), expected(href));
    });
  }

  test('Markdown images take the same road as raw HTML (markdown-it rejects script URLs before)', () => {
    for (const [src, href] of SOURCES.filter(([s]) => s && !/^(java|data:)/.test(s))) {
      const fragment = sanitizeToFragment(md.render(`![pic](${src})`));
      assert.deepEqual(linkOf(fragment.querySelector('a')!), expected(href), src);
    }
    const reference = sanitizeToFragment(md.render('![pic][r]\n\n[r]: http://evil.example/ref.png'));
    assert.deepEqual(linkOf(reference.querySelector('a')!), expected('http://evil.example/ref.png'));
  });

  test('an image without alt text is labelled "image"', () => {
    const drawn = sanitizeToFragment('<img src="http://e/x.png">').querySelector('a')!;
    assert.deepEqual(linkOf(drawn), expected('http://e/x.png', 'image'));
    assert.deepEqual(linkOf(imageLink(document, 'http://e/x.png', '')), expected('http://e/x.png', 'image'));
  });

  test('inline raster data stays an image, SVG data does not', () => {
    const svg = md.render('![s](data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=)');
    const fragment = sanitizeToFragment(`<img src="${PNG}" alt="dot">${svg}`);
    const images = fragment.querySelectorAll('img');
    assert.equal(images.length, 1);
    assert.equal(images[0].getAttribute('src'), PNG);
    assert.ok(INLINE_IMAGE.test(PNG) && INLINE_IMAGE.test(PNG.replace('png', 'JPEG')));
    assert.ok(!INLINE_IMAGE.test('data:image/svg+xml;base64,PHN2Zz48L3N2Zz4='));
  });

  test('the <template> pass makes an image the sanitizer did not see a link too (srcset dropped)', () => {
    // sanitizeToFragment's second wall: sanitize() already replaced it; a second run changes nothing.
    const once = sanitize('<img src="//h/x.png" srcset="//h/y.png 2x" alt="pic">');
    assert.equal(sanitize(once), once);
    assert.ok(!once.includes('srcset') && !once.includes('<img'));
  });
});

describe('the policy allowlist', () => {
  test('tags outside the policy go, their text stays (script and style content go whole)', () => {
    const out = sanitize('<p>a<script>alert(1)</script><iframe src="https://e/"></iframe><u>b</u><style>p{}</style>');
    assert.equal(out, '<p>ab</p>');
    for (const tag of ['table', 'details', 'summary', 'kbd', 'del']) {
      assert.ok(POLICY.sanitizer.tags.includes(tag));
      assert.ok(sanitize(`<${tag}>x</${tag}>`).startsWith(`<${tag}>`), tag);
    }
  });

  test('attributes outside the policy go: event handlers, ids, data-*', () => {
    assert.equal(sanitize('<div class="c" id="i" onclick="x()" data-x="1">d</div>'), '<div class="c">d</div>');
    assert.equal(sanitize('<span title="t">s</span>'), '<span>s</span>');
  });

  test('links keep only safe URLs and get the link rules', () => {
    const html = '<a href="javascript:alert(1)">a</a><a href="https://ok.example/">b</a><a href="rel/x">c</a>';
    const fragment = sanitizeToFragment(html);
    const links = [...fragment.querySelectorAll('a')];
    assert.deepEqual(
      links.map(a => a.getAttribute('href')),
      [null, 'https://ok.example/', 'rel/x']
    );
    for (const a of links) {
      assert.equal(a.getAttribute('rel'), LINK_REL);
      assert.equal(a.getAttribute('referrerpolicy'), 'no-referrer');
    }
  });

  test('a style keeps only the policy properties, keywords only', () => {
    assert.equal(keptStyle('text-align:center'), 'text-align: center');
    assert.equal(keptStyle('TEXT-ALIGN: Right; position: fixed'), 'text-align: right');
    assert.equal(keptStyle('text-align: url(x)'), '');
    assert.equal(keptStyle('background:url(javascript:alert(1))'), '');
    const cell = (style: string) => `<table><tbody><tr><td style="${style}">t</td></tr></tbody></table>`;
    assert.equal(sanitize(cell('text-align:center; position:fixed')), cell('text-align: center'));
    assert.equal(sanitize('<p style="position:fixed">p</p>'), '<p>p</p>');
  });

  test('safeUrl: the policy schemes or relative, once white space is out', () => {
    const safe = ['http://x', 'HTTPS://x', 'mailto:a@b', '//h/x', '/api/x', 'rel/a.png', '#top', '?q', './a:b', ''];
    const unsafe = [
      'javascript:x',
      ' javascript:x',
      'java\tscript:x',
      'java\nscript:x',
      'data:text/html,x',
      'vbscript:x',
      'file:///etc',
      'x:y'
    ];
    assert.deepEqual(
      safe.filter(u => !safeUrl(u)),
      []
    );
    assert.deepEqual(
      unsafe.filter(u => safeUrl(u)),
      []
    );
  });
});
