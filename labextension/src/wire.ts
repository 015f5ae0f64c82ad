/**
 * What crosses the wire to the front end, typed.
 *
 * - The saved documents, a transcript and a comparison: their types are generated from the
 *   schema the Python side publishes (transcript_schema.ts). A document comes from a notebook,
 *   which may be old, edited by hand or hostile, so a renderer reads it as `Unchecked<T>`: the
 *   schema's field names (a misspelt or renamed field does not compile), each value checked
 *   where it is read (`str`, `num`, `list` in transcript.ts).
 * - The live widget's messages (kernel -> browser): the ops of one run (notebook/views/run_view.py,
 *   `WidgetView`) and a comparison's layout messages (notebook/views/compare_view.py), as
 *   discriminated unions; and the browser's answers.
 */

import type { IDisplayData } from '@jupyterlab/nbformat';

import type {
  ArtifactSummary,
  ComparisonRecord,
  ComparisonTable,
  ServerToolPart,
  ToolCallPart,
  Transcript,
  TranscriptCitation
} from './transcript_schema';

export type {
  ArtifactSummary,
  ComparisonEntry,
  ComparisonRecord,
  ComparisonTable,
  MediaPart,
  OtherPart,
  ReasoningPart,
  ServerSource,
  ServerToolPart,
  TextPart,
  ToolCallPart,
  Transcript,
  TranscriptCitation,
  TranscriptMessage
} from './transcript_schema';

/** A JSON object whose values are still to be checked. */
export type Json = { [key: string]: unknown };

/** A document's object as read from a notebook: the schema's fields, every value unchecked. */
export type Unchecked<T> = { [K in keyof T]?: unknown };

/** What a live segment holds: answer text, reasoning, a tool call's card, an off-prompt artifact,
 * a provider-side tool call's card (web search, code execution…). */
export type SegmentKind = 'text' | 'reasoning' | 'tool' | 'artifact' | 'server';

/** An MCP call's last progress report (`notifications/progress`): how far, of what total (null:
 * unknown), and the server's message. */
export interface ToolProgress {
  progress: number;
  total: number | null;
  message: string | null;
}

/** A tool call's card as far as it is known (the arguments' JSON text streams as `text` ops);
 * `progress` until its result comes. */
export type ToolCallState = Partial<ToolCallPart> & { progress?: ToolProgress };

/** A provider-side tool call's card as far as it is known (its input streams as `text` ops;
 * `progress`: the provider's word for what it is doing until the result comes). */
export type ServerToolState = Partial<ServerToolPart> & { progress?: string };

/** A call waiting for Approve / Deny: `request` names the question in the answer. */
export interface ApprovalAsk {
  kind?: undefined;
  request: string;
  name: string;
  arguments: { [key: string]: unknown };
  /** What the call would change (a notebook edit's diff, notebook/workspace.py), redacted. */
  preview?: string;
}

/** An MCP server's sampling request during a call, to approve, edit or deny
 * (notebook/views/asks.py `sampling_ask`): its messages' text, the tokens it may take, the model
 * hints; `editable`: the text of its last user message. */
export interface SamplingAsk {
  kind: 'sampling';
  request: string;
  server: string;
  system: string;
  messages: { role: string; text: string }[];
  max_tokens: number;
  hints: string[];
  model: string;
  editable: string;
  arguments: { [key: string]: unknown };
}

/** One field of an elicitation form (core/interaction.py `FormField.as_json`). */
export interface FormField {
  name: string;
  kind: 'string' | 'number' | 'integer' | 'boolean' | 'choice' | 'choices';
  title: string;
  description: string;
  required: boolean;
  default: unknown;
  /** (value, label) pairs of a choice. */
  options: [string, string][];
  format: string | null;
  minimum: number | null;
  maximum: number | null;
}

/** An MCP server's elicitation during a call (asks.py `elicitation_ask`): a form of `fields`, or
 * a `url` to open (empty when it was not http(s)); `errors`: what the kernel found wrong in the
 * last answer, by field. */
export interface ElicitationAsk {
  kind: 'elicitation';
  request: string;
  server: string;
  message: string;
  url?: string;
  fields?: FormField[];
  errors?: { [name: string]: string };
  arguments: { [key: string]: unknown };
}

/** A question waiting in a call's card. */
export type Ask = ApprovalAsk | SamplingAsk | ElicitationAsk;

/** The live footer: the fixed figures, and what the clock shows from `elapsed` seconds on (null: stopped). */
export interface LiveStatus {
  figures: string[];
  ticking: 'waiting' | 'streaming' | 'approval' | 'answer' | null;
  elapsed: number;
}

/** One change to a run's view (`WidgetView._ops`). */
export type LiveOp =
  | ['seg', number, SegmentKind, ToolCallState | null]
  | ['text', number, string]
  | ['tool', number, ToolCallState]
  | ['ask', number, Ask | null]
  | ['server', number, ServerToolState]
  | ['cite', number, TranscriptCitation]
  | ['artifact', number, ArtifactSummary]
  | ['notice', string]
  | ['error', string]
  | ['interrupted']
  | ['status', LiveStatus];

/** The rest of a finished run's saved output (live_widget.end_message): put in place of the widget. */
export interface SavedOutputParts {
  mime: string;
  fallbacks: Json;
  metadata: Json;
  model_id: string;
}

/** A finished run's saved output, as the page puts it in place of the live widget (nbformat). */
export type SavedOutput = IDisplayData;

/** A run's messages: the run so far (the answer to "hello"), what changed since, and its end. */
export type RunMessage =
  | { type: 'snapshot'; seq: number; doc: { ops: LiveOp[] } }
  | { type: 'ops'; seq: number; ops: LiveOp[] }
  | { type: 'end'; doc: Transcript; output?: SavedOutputParts | null };

/** A comparison pane's title as typed, and the `provider:model` it stands for. */
export interface PaneTitle {
  title: string;
  resolved: string;
}

/** A comparison's own messages; a run's messages come tagged with its `key` ("pane/run"). */
export type CompareMessage =
  | {
      type: 'compare';
      panes: PaneTitle[];
      runs: number;
      started: [number, number][];
      table: ComparisonTable | null;
      footer: string;
      selected: (number | null)[];
    }
  | { type: 'run'; pane: number; run: number }
  | { type: 'table'; table: ComparisonTable | null }
  | { type: 'end'; doc: ComparisonRecord; output?: SavedOutputParts | null };

/** A run's message within a comparison. */
export type KeyedRunMessage = RunMessage & { key: string };

/** The matrix's filters (matrix_filters.ts). */
export type MatrixFilter = 'all' | 'failed' | 'disagree' | 'changed';

/** What a live evaluation's messages carry besides its page (notebook/views/evaluation_pages.py):
 * the progress line, a background run's note, the rows each filter keeps, and (with a page, else at
 * most once a second) the summary per column. */
export interface EvaluationProgress {
  progress: string;
  note: string;
  counts: { [filter in MatrixFilter]?: number };
  summary?: Json[];
}

/** The page of rows a live evaluation shows: where it starts among the rows `filter` keeps
 * (`matching` of them), its row numbers, and the fields of each (by row number). */
export interface EvaluationPage {
  start: number;
  size: number;
  filter: MatrixFilter;
  matching: number;
  rows: number[];
  fields: { [row: string]: Json };
}

/** A live evaluation's messages (kernel -> browser): a page (the evaluation document with the
 * page's runs only), or the progress alone. */
export type EvaluationMessage =
  | ({ type: 'page'; page: EvaluationPage; doc: Json } & EvaluationProgress)
  | ({ type: 'progress' } & EvaluationProgress);

/** What the browser says: hello (catch me up), a verdict on a call or a sampling request (`text`:
 * its last user message as edited), the answer to an elicitation, the run picked in a comparison's
 * pane; a run's message within a comparison is tagged with the run's `key`. */
export type FrontMessage = (
  | { type: 'hello' }
  | { type: 'approve'; request: string; verdict: boolean; text?: string }
  | { type: 'elicit'; request: string; action: 'accept' | 'decline' | 'cancel'; content?: { [name: string]: unknown } }
  | { type: 'select'; pane: number; run: number }
  | { type: 'page'; start: number; filter: MatrixFilter }
  | { type: 'bundle' }
) & { key?: string };

/** The kernel's answer to `{type: "bundle"}` (live_loader.ts): the live view's front end (`esm`, an
 * ES module's text) and its styles (`css`), for a page without the labextension. */
export interface BundleMessage {
  type: 'bundle';
  esm: string;
  css: string;
}

/** anywidget's model, as the live view uses it. */
export interface WidgetModel {
  get(name: string): unknown;
  on(name: 'msg:custom', callback: (message: unknown) => void): void;
  off(name: 'msg:custom', callback: (message: unknown) => void): void;
  send(content: FrontMessage): void;
}
