/**
 * JupyterLab plugin: `%%agent` and `%%compare` cell bodies are edited as Markdown (a prompt,
 * a Jinja template over the notebook's variables), not Python.
 *
 * A CodeMirror 6 extension, registered with `IEditorExtensionRegistry`, is added to every
 * Python cell editor. It holds a compartment that is empty for ordinary cells and holds
 * JupyterLab's own Markdown language (from `IEditorLanguageRegistry`, fenced code
 * highlighted in its language) when the cell's first line is one of `CELL_MAGICS`; at the
 * highest precedence, so it wins over the kernel's language. The check runs on edits that
 * touch the first line only. Jinja tags (`{{ … }}`, `{% … %}`, `{# … #}`) and the magic
 * line are marked so the theme can colour them.
 */

import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import {
  EditorExtensionRegistry,
  IEditorExtensionRegistry,
  IEditorLanguageRegistry
} from '@jupyterlab/codemirror';
import { Compartment, EditorState, Extension, Prec } from '@codemirror/state';
import { Decoration, DecorationSet, EditorView, MatchDecorator, ViewPlugin, ViewUpdate } from '@codemirror/view';

import gradesPlugin from './grades_plugin';
import live from './live';
import { LIVE_BUILD } from './live_build';
import { liveRegistry } from './live_registry';
import reopenedOutput from './reopened';
import workspace from './workspace';

/** Cell magics whose body is a prompt template. */
export const CELL_MAGICS = ['agent', 'compare'];

const MAGIC_LINE = new RegExp(`^\\s*%%(?:${CELL_MAGICS.join('|')})(?:\\s|$)`);

/** True when `firstLine` starts a `%%agent` / `%%compare` cell. */
export function isPromptCell(firstLine: string): boolean {
  return MAGIC_LINE.test(firstLine);
}

function firstLine(state: EditorState): string {
  return state.doc.line(1).text;
}

const jinja = new MatchDecorator({
  regexp: /\{\{[^\n]*?\}\}|\{%[^\n]*?%\}|\{#[^\n]*?#\}/g,
  decoration: Decoration.mark({ class: 'ipyagent-jinja' })
});

/** Jinja tags and the magic line, marked (only while the prompt language is on). */
const marks = ViewPlugin.fromClass(
  class {
    decorations: DecorationSet;
    constructor(view: EditorView) {
      this.decorations = jinja.createDeco(view);
    }
    update(update: ViewUpdate) {
      this.decorations = jinja.updateDeco(update, this.decorations);
    }
  },
  { decorations: plugin => plugin.decorations }
);

const magicLine = Decoration.line({ class: 'ipyagent-magic-line' });

const magicLineMark = EditorView.decorations.compute(['doc'], state =>
  Decoration.set([magicLine.range(state.doc.line(1).from)])
);

/**
 * The editor extension: `prompt` (the Markdown language support and marks) while the first
 * line is a prompt magic, nothing otherwise.
 */
export function promptCellExtension(prompt: Extension, initial: string): Extension {
  const compartment = new Compartment();
  const on = Prec.highest([prompt, marks, magicLineMark, EditorView.editorAttributes.of({ 'data-ipyagent-language': 'markdown' })]);
  const follow = EditorState.transactionExtender.of(tr => {
    if (!tr.docChanged) {
      return null;
    }
    const before = isPromptCell(firstLine(tr.startState));
    const after = isPromptCell(firstLine(tr.state));
    return before === after ? null : { effects: compartment.reconfigure(after ? on : []) };
  });
  return [compartment.of(isPromptCell(initial.split('\n', 1)[0]) ? on : []), follow];
}

/**
 * True for the editor of a Python code cell. A notebook whose kernel has not said its language
 * yet (a new notebook, or one saved without `language_info`) makes its cells' editors with
 * `text/plain` and switches them to Python when the kernel answers, without making them again:
 * a code cell of `text/plain` is taken as Python, else its `%%agent` body would stay Python.
 */
export function onPythonCell(model: { mimeType: string; sharedModel: unknown }): boolean {
  const mime = model.mimeType;
  if (/python/.test(mime)) {
    return true;
  }
  const cellType = (model.sharedModel as { cell_type?: string }).cell_type;
  return mime === 'text/plain' && cellType === 'code';
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'ipyagent:prompt-cells',
  description: '%%agent and %%compare cell bodies are highlighted as Markdown (Jinja), not Python',
  autoStart: true,
  requires: [IEditorExtensionRegistry, IEditorLanguageRegistry],
  activate: async (_app: JupyterFrontEnd, extensions: IEditorExtensionRegistry, languages: IEditorLanguageRegistry) => {
    const markdown = await languages.getLanguage('markdown');
    if (!markdown?.support) {
      console.warn('ipyagent: no Markdown language in this JupyterLab; %%agent cells stay Python');
      return;
    }
    const support = markdown.support;
    extensions.addExtension({
      name: 'ipyagent:prompt-cells',
      factory: options => {
        if (options.inline === false || !onPythonCell(options.model)) {
          return null; // Python cells of a notebook or console only
        }
        return EditorExtensionRegistry.createImmutableExtension(
          promptCellExtension(support, options.model.sharedModel.getSource())
        );
      }
    });
  }
};

/** The live view's front end, registered for the widgets' loader (live_loader.ts), so that a live
 * view in JupyterLab or Notebook 7 needs nothing from the kernel but its runs. */
const liveView: JupyterFrontEndPlugin<void> = {
  id: 'ipyagent:live-view',
  description: "registers the live view's front end for the widgets of this build",
  autoStart: true,
  activate: () => {
    liveRegistry()[LIVE_BUILD] = live;
  }
};

export default [plugin, reopenedOutput, gradesPlugin, liveView, workspace];
