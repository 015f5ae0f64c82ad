/**
 * The page's registry of live-view front ends, shared by the labextension and the widget's loader
 * (live_loader.ts) through `globalThis[Symbol.for(LIVE_REGISTRY)]`: `{[build]: module}`, where
 * `build` names one build of live.ts (the first 16 hex digits of the SHA-256 of the esbuild bundle,
 * `static/live.js`) and `module` is that build's anywidget module (live.ts's default export).
 *
 * The labextension registers its own build when JupyterLab or Notebook 7 starts (plugin.ts); a
 * loader that finds no module of its build gets the bundle from the kernel once and registers it,
 * so every later live view on the page uses that one copy.
 */

import type { WidgetModel } from './wire';

/** The key of the registry on `globalThis` (through `Symbol.for`, so every bundle finds the same). */
export const LIVE_REGISTRY = 'ipyagent.live';

/** An anywidget module (https://anywidget.dev/en/afm/): the live view's, live.ts. */
export interface LiveModule {
  initialize(props: { model: WidgetModel }): void;
  render(props: { model: WidgetModel; el: HTMLElement }): () => void;
}

/** The page's registry (made on first use). */
export function liveRegistry(): { [build: string]: LiveModule } {
  const shared = globalThis as unknown as { [key: symbol]: { [build: string]: LiveModule } | undefined };
  const key = Symbol.for(LIVE_REGISTRY);
  let registry = shared[key];
  if (!registry) {
    registry = shared[key] = {};
  }
  return registry;
}
