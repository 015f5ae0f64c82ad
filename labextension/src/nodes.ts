/**
 * The smallest pieces every renderer draws with: a value of an unchecked document read as what it
 * should be (`str`, `num`, `list`, `isObject`: anything else reads as empty), an element with text
 * (never HTML), and an image the model returned. They import nothing of ours but the policy, so
 * every renderer (transcript.ts, citations.ts, evaluation.ts...) can use them without a circle.
 */

import { RASTER_TYPES } from './policy';
import type { Json, OtherPart, Unchecked } from './wire';

export function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function str(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

export function num(value: unknown): number | null {
  return typeof value === 'number' && isFinite(value) ? value : null;
}

export function list(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

/** An element with classes and text (text, never HTML). */
export function el(tag: string, className = '', text?: string): HTMLElement {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

/** An image the model returned (an `other` part of kind image with base64 data), as an <img>; else null. */
export function imageNode(part: Unchecked<OtherPart>): HTMLElement | null {
  const mime = str(part.mime_type);
  const data = str(part.data).replace(/[^A-Za-z0-9+/=]/g, '');
  if (part.kind !== 'image' || !data || !RASTER_TYPES.has(mime)) {
    return null;
  }
  const img = document.createElement('img');
  img.className = 'ipyagent-image';
  img.alt = 'image from the model';
  img.src = `data:${mime};base64,${data}`;
  return img;
}
