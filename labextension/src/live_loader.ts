/**
 * The live view widget's `_esm` (live_widget.py): a loader of a few hundred bytes in place of the
 * 300 kB front end, so that the widget state a client keeps of a finished view (nbclient,
 * papermill and nbconvert keep every widget's last state in the notebook) holds no front-end code.
 *
 * It draws with the module of its build (live_registry.ts), taken from
 * - the page's registry, where the labextension (JupyterLab, Notebook 7) registered it, or where
 *   an earlier live view on the page put the kernel's copy;
 * - else the kernel: `{type: "bundle"}` on the widget's comm, answered with `{type: "bundle", esm,
 *   css}` (a custom message, which no client keeps in widget state). The module is imported from a
 *   blob URL as anywidget imports an `_esm` string (VS Code, Colab and any anywidget host), its
 *   styles are added to the page once, and it is registered for the page's later views.
 *
 * While the kernel's copy comes, `render` draws nothing; the module then initializes the model
 * and draws (it asks the kernel for the run so far: live.ts).
 */

import { LiveModule, liveRegistry } from './live_registry';
import type { BundleMessage, WidgetModel } from './wire';

/** The build this widget draws with: the kernel writes its id in place of this text. */
const BUILD = '__IPYAGENT_LIVE_BUILD__';

function addStyles(css: string): void {
  const id = `ipyagent-live-${BUILD}`;
  if (css && !document.getElementById(id)) {
    document.head.appendChild(Object.assign(document.createElement('style'), { id, textContent: css }));
  }
}

/** The kernel's copy of the module, asked for on `model`'s comm, registered for the page. */
function fromKernel(model: WidgetModel): Promise<LiveModule> {
  return new Promise((resolve, reject) => {
    const receive = (msg: unknown): void => {
      const bundle = msg as BundleMessage | null;
      if (!bundle || bundle.type !== 'bundle' || typeof bundle.esm !== 'string') {
        return;
      }
      model.off('msg:custom', receive);
      const registered = liveRegistry()[BUILD];
      if (registered) {
        resolve(registered); // another view's copy came first
        return;
      }
      addStyles(bundle.css);
      const url = URL.createObjectURL(new Blob([bundle.esm], { type: 'text/javascript' }));
      import(url)
        .then((module: { default: LiveModule }) => resolve((liveRegistry()[BUILD] ??= module.default)), reject)
        .finally(() => URL.revokeObjectURL(url));
    };
    model.on('msg:custom', receive);
    model.send({ type: 'bundle' });
  });
}

/** anywidget's module factory (awaited once per widget model). */
export default async function liveLoader(): Promise<LiveModule> {
  const registered = liveRegistry()[BUILD];
  if (registered) {
    return registered;
  }
  const loads = new WeakMap<object, Promise<LiveModule>>();
  const load = (model: WidgetModel): Promise<LiveModule> => {
    let loading = loads.get(model);
    if (!loading) {
      const now = liveRegistry()[BUILD];
      loading = now ? Promise.resolve(now) : fromKernel(model);
      loads.set(model, loading);
    }
    return loading;
  };
  return {
    initialize({ model }) {
      load(model).then(
        module => module.initialize({ model }),
        error => console.error('ipyagent: the live view did not load', error)
      );
    },
    render({ model, el }) {
      let gone = false;
      let dispose: (() => void) | null = null;
      load(model).then(
        module => {
          if (!gone) {
            dispose = module.render({ model, el });
          }
        },
        () => (el.textContent = 'ipyagent: the live view did not load; the output shows the run when it ends.')
      );
      return () => {
        gone = true;
        dispose?.();
      };
    }
  };
}
