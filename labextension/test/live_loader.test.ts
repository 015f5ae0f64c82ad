/**
 * live_loader.ts, the live view widget's `_esm`: it draws with the page's registered front end of
 * its build (the labextension's) and, where none is, asks the kernel once for the bundle, imports
 * it, adds its styles and registers it for the page.
 */

import './dom';

import assert from 'node:assert/strict';
import { test } from 'node:test';

import liveLoader from '../src/live_loader';
import { LiveModule, liveRegistry } from '../src/live_registry';
import type { WidgetModel } from '../src/wire';

/** The build the loader names before the kernel writes its id in (live_widget.py). */
const BUILD = '__IPYAGENT_LIVE_BUILD__';

const hooks = globalThis as unknown as { [name: string]: (value: unknown) => void };
/** A front end as the kernel sends it: it tells the test when it initializes and draws. */
const ESM = `export default {
  initialize({ model }) { globalThis.__initialized(model); },
  render({ model, el }) { el.textContent = 'drawn'; globalThis.__drawn(el); return () => { el.textContent = 'gone'; }; }
};`;
// Node imports no blob: URL; a data: URL of the same text stands for it.
URL.createObjectURL = () => `data:text/javascript,${encodeURIComponent(ESM)}`;
URL.revokeObjectURL = () => undefined;

class Model implements WidgetModel {
  sent: unknown[] = [];
  handlers = new Set<(message: unknown) => void>();
  get(): unknown {
    return 'run';
  }
  on(_name: 'msg:custom', callback: (message: unknown) => void): void {
    this.handlers.add(callback);
  }
  off(_name: 'msg:custom', callback: (message: unknown) => void): void {
    this.handlers.delete(callback);
  }
  send(content: unknown): void {
    this.sent.push(content);
  }
  receive(message: unknown): void {
    [...this.handlers].forEach(handler => handler(message));
  }
}

function reset(): void {
  delete liveRegistry()[BUILD];
  document.head.replaceChildren();
}

function next(hook: string): Promise<unknown> {
  return new Promise(resolve => (hooks[hook] = resolve));
}

test('a registered front end of its build is used as it is', async () => {
  reset();
  const registered: LiveModule = { initialize: () => undefined, render: () => () => undefined };
  liveRegistry()[BUILD] = registered;
  assert.equal(await liveLoader(), registered);
  liveRegistry()['another build'] = registered;
  delete liveRegistry()[BUILD];
  assert.notEqual(await liveLoader(), registered); // another build's is not taken
});

test('without one, the kernel is asked once; its front end draws, styled, and is registered', async () => {
  reset();
  const widget = await liveLoader();
  const model = new Model();
  const el = document.createElement('div');
  widget.initialize({ model });
  widget.render({ model, el });
  assert.deepEqual(model.sent, [{ type: 'bundle' }]); // one request for both
  assert.equal(el.textContent, '');
  const initialized = next('__initialized');
  const drawn = next('__drawn');
  model.receive({ type: 'snapshot', seq: 1, doc: { ops: [] } }); // not the answer: waits on
  model.receive({ type: 'bundle', esm: ESM, css: '.ipyagent-view { color: red; }' });
  assert.equal(await initialized, model);
  assert.equal(await drawn, el);
  assert.equal(el.textContent, 'drawn');
  assert.equal(model.handlers.size, 0);
  const styles = document.querySelectorAll(`style#ipyagent-live-${BUILD}`);
  assert.equal(styles.length, 1);
  assert.equal(styles[0].textContent, '.ipyagent-view { color: red; }');
  // The page's next live view takes the registered copy and asks for nothing.
  const registered = liveRegistry()[BUILD];
  assert.ok(registered);
  assert.equal(await liveLoader(), registered);
});

test('a view disposed before the front end came draws nothing', async () => {
  reset();
  const widget = await liveLoader();
  const model = new Model();
  const el = document.createElement('div');
  widget.initialize({ model });
  const dispose = widget.render({ model, el });
  dispose();
  const initialized = next('__initialized');
  hooks.__drawn = () => assert.fail('a disposed view was drawn');
  model.receive({ type: 'bundle', esm: ESM, css: '' });
  await initialized; // the render that follows it on the same load has run by now
  assert.equal(el.textContent, '');
  assert.equal(document.querySelectorAll('style').length, 0); // no styles sent, none added
});
