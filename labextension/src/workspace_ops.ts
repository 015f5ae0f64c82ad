/**
 * The notebook operations the kernel asks of the front end (workspace.ts carries them; notebook/
 * workspace.py sends them), done on a notebook model: `cells`, `insert`, `edit`, `set_outputs`.
 * Sources are set as text; outputs go into the cell's output model, drawn by the notebook's own
 * renderers as any kernel output.
 */

import type { ICodeCellModel } from '@jupyterlab/cells';
import type { INotebookModel } from '@jupyterlab/notebook';
import type { IOutput } from '@jupyterlab/nbformat';

/** A cell as the kernel reads it. */
export interface CellJSON {
  cell_type: string;
  source: string;
  outputs: unknown[];
  execution_count: number | null;
  id: string;
}

/** A request of the kernel, as sent (every field checked before use). */
export interface Request {
  request?: unknown;
  op?: unknown;
  index?: unknown;
  source?: unknown;
  cell_type?: unknown;
  outputs?: unknown;
  execution_count?: unknown;
}

/** Cell `index` of `model` as JSON. */
export function cellJSON(model: INotebookModel, index: number): CellJSON {
  const cell = model.cells.get(index);
  const code = cell.type === 'code' ? (cell as ICodeCellModel) : null;
  return {
    cell_type: cell.type,
    source: cell.sharedModel.getSource(),
    outputs: code ? code.outputs.toJSON() : [],
    execution_count: code ? code.executionCount : null,
    id: cell.id
  };
}

function checkIndex(model: INotebookModel, index: unknown, end: number): number {
  if (typeof index !== 'number' || !Number.isInteger(index) || index < 0 || index >= end) {
    const count = model.cells.length;
    throw new Error(count === 0 ? `there is no cell ${String(index)}: the notebook has no cells`
      : `there is no cell ${String(index)}: cells are numbered 0 to ${count - 1}`);
  }
  return index;
}

/** Do `request` on `model`; the answer's data (without its `request`). */
export function answer(model: INotebookModel, request: Request): { [key: string]: unknown } {
  const count = model.cells.length;
  if (request.op === 'cells') {
    return { cells: Array.from({ length: count }, (_, n) => cellJSON(model, n)) };
  }
  if (request.op === 'insert') {
    const index = checkIndex(model, request.index, count + 1);
    const cellType = request.cell_type === 'markdown' ? 'markdown' : 'code';
    const source = String(request.source ?? '');
    const cell = cellType === 'code'
      ? { cell_type: 'code', source, outputs: [], execution_count: null, metadata: {} }
      : { cell_type: 'markdown', source, metadata: {} };
    model.sharedModel.insertCell(index, cell);
    return { cell: cellJSON(model, index) };
  }
  const index = checkIndex(model, request.index, count);
  if (request.op === 'edit') {
    model.cells.get(index).sharedModel.setSource(String(request.source ?? ''));
    return { cell: cellJSON(model, index) };
  }
  if (request.op === 'set_outputs') {
    const cell = model.cells.get(index);
    if (cell.type !== 'code') {
      throw new Error(`cell ${index} is not a code cell`);
    }
    const code = cell as ICodeCellModel;
    code.outputs.clear();
    for (const output of Array.isArray(request.outputs) ? request.outputs : []) {
      code.outputs.add(output as IOutput);
    }
    code.executionCount = typeof request.execution_count === 'number' ? request.execution_count : null;
    return { cell: cellJSON(model, index) };
  }
  throw new Error(`unknown notebook operation ${JSON.stringify(request.op)}`);
}
