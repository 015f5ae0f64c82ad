/**
 * A DOM for the unit tests (jsdom), put on `globalThis` as a browser has it. Imported first by
 * every test that draws, so the modules under test find `window` and `document` when they load.
 */

import { JSDOM } from 'jsdom';

const dom = new JSDOM('<!doctype html><html><body></body></html>', { pretendToBeVisual: true });
const globals = globalThis as unknown as { [name: string]: unknown };
const names = [
  'window',
  'document',
  'Node',
  'Element',
  'HTMLElement',
  'HTMLAnchorElement',
  'HTMLDetailsElement',
  'DocumentFragment',
  'DOMParser',
  'Event',
  'CustomEvent',
  'NodeFilter',
  'Option',
  'requestAnimationFrame',
  'cancelAnimationFrame'
];
const window = dom.window as unknown as { [name: string]: unknown };
for (const name of names) {
  globals[name] = window[name];
}

/** The document's body, emptied. */
export function body(): HTMLElement {
  document.body.replaceChildren();
  return document.body;
}
