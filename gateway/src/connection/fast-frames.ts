/**
 * Hand-written acceptors for the hot frames: a request's envelope, the `publish` / `persist`
 * params, the settles and a `request()`'s `wait`. At tens of thousands of publishes a second,
 * zod's parse of these was a sixth of the gateway's CPU (bench/README.md › publish-throughput).
 *
 * The zod schemas (@eventflow/core/protocol) stay the single source of truth: each function here
 * only ever ACCEPTS, returning the value zod would return, or undefined when the input is not
 * plainly valid; the caller then lets zod judge it and word the error. So a refusal's code and
 * message are zod's by construction, and the one thing to prove is that nothing is accepted here
 * that zod refuses (fast-frames.test.ts compares both on generated valid and invalid frames).
 *
 * The inputs come from JSON.parse: plain objects and arrays, finite or infinite numbers (1e400),
 * strings, booleans and null. The accepted value is the input object itself (zod returns a copy
 * of the same content); nothing downstream mutates params.
 */
import { isWellFormedText, TRACEPARENT, TRACESTATE_MAX_LENGTH, type EventInput, type JsonObject } from '@eventflow/core';
import { FORBIDDEN_DATA_KEY } from '@eventflow/core/protocol';

/** Deeper data is left to zod: a walk here never needs more stack than this. */
const MAX_FAST_DEPTH = 32;

type Json = JsonObject[string];

/** The envelope of a request frame, as `requestFrame` parses it; undefined: let zod decide. */
export function acceptRequest(json: unknown): { id: number; op: string; params: unknown } | undefined {
  if (!isRecord(json)) return undefined;
  let keys = 0;
  for (const key in json) {
    if (key !== 'type' && key !== 'id' && key !== 'op' && key !== 'params') return undefined;
    keys++;
  }
  const { type, id, op } = json as { type?: unknown; id?: unknown; op?: unknown };
  if (type !== 'request' || !isCount(id) || typeof op !== 'string' || op.length > 64) return undefined;
  // `params` is z.optional(z.unknown()): anything, or absent.
  if (keys === 3) return { id, op, params: undefined };
  if (keys !== 4 || !('params' in json)) return undefined;
  return { id, op, params: (json as { params: unknown }).params };
}

/** `publish` / `persist` params (`persist` has no requireConsumer); undefined: let zod decide. */
export function acceptWrite(params: unknown, op: 'publish' | 'persist'): { event: EventInput; expectedVersion?: number; requireConsumer?: boolean } | undefined {
  if (!isRecord(params)) return undefined;
  for (const key in params) {
    if (key === 'event') continue;
    if (key === 'expectedVersion') {
      if (!isCount(params[key])) return undefined;
    } else if (key === 'requireConsumer' && op === 'publish') {
      if (typeof params[key] !== 'boolean') return undefined;
    } else return undefined;
  }
  if (!acceptEvent(params.event)) return undefined;
  return params as { event: EventInput; expectedVersion?: number; requireConsumer?: boolean };
}

const SETTLE_OUTCOMES = new Set(['success', 'failed', 'release', 'retry']);
/** settle's `delayMs`: an integer from 0 to a day. */
const MAX_DELAY_MS = 86_400_000;

/** `settle` params, as many as there are deliveries; undefined: let zod decide. */
export function acceptSettle(params: unknown): { delivery: string; outcome: 'success' | 'failed' | 'release' | 'retry'; delayMs?: number; error?: { message: string; code?: string } } | undefined {
  if (!isRecord(params)) return undefined;
  let required = 0;
  for (const key in params) {
    const value = params[key];
    if (key === 'delivery') {
      if (typeof value !== 'string' || value.length === 0 || value.length > 64) return undefined;
      required++;
    } else if (key === 'outcome') {
      if (typeof value !== 'string' || !SETTLE_OUTCOMES.has(value)) return undefined;
      required++;
    } else if (key === 'delayMs') {
      if (!isCount(value) || value > MAX_DELAY_MS) return undefined;
    } else if (key === 'error') {
      if (!isRecord(value)) return undefined;
      for (const field in value) {
        const text = value[field];
        if (typeof text !== 'string' || text.length > (field === 'message' ? 4096 : field === 'code' ? 128 : -1) || !isWellFormedText(text)) return undefined;
      }
      if (typeof value.message !== 'string') return undefined;
    } else return undefined;
  }
  // delayMs beside another outcome: zod refuses it (it would be ignored).
  if (params.delayMs !== undefined && params.outcome !== 'retry') return undefined;
  return required === 2 ? (params as { delivery: string; outcome: 'success' | 'failed' | 'release' | 'retry' }) : undefined;
}

/** `wait`'s `names`: one to this many. */
const MAX_WAIT_NAMES = 64;

/** `wait` params (a `request()` sends one with every publish); undefined: let zod decide. */
export function acceptWait(params: unknown): { wait: string; domain: string; pid: string; names: string[]; afterId?: string; afterPosition?: number; request?: string } | undefined {
  if (!isRecord(params)) return undefined;
  let required = 0;
  for (const key in params) {
    const value = params[key];
    if (key === 'wait') {
      // `handle`: 1..64 characters, any.
      if (typeof value !== 'string' || value.length === 0 || value.length > 64) return undefined;
      required++;
    } else if (key === 'domain' || key === 'pid') {
      if (!isIdentifier(value)) return undefined;
      required++;
    } else if (key === 'names') {
      if (!Array.isArray(value) || value.length === 0 || value.length > MAX_WAIT_NAMES) return undefined;
      for (let i = 0; i < value.length; i++) if (!isIdentifier(value[i])) return undefined;
      required++;
    } else if (key === 'afterId' || key === 'request') {
      if (!isIdentifier(value)) return undefined;
    } else if (key === 'afterPosition') {
      if (!isCount(value)) return undefined;
    } else return undefined;
  }
  return required === 4 ? (params as { wait: string; domain: string; pid: string; names: string[] }) : undefined;
}

/** `settleMany` params; undefined: let zod decide. */
export function acceptSettleMany(params: unknown, max: number): { settles: Array<NonNullable<ReturnType<typeof acceptSettle>>> } | undefined {
  if (!isRecord(params)) return undefined;
  for (const key in params) if (key !== 'settles') return undefined;
  const { settles } = params;
  if (!Array.isArray(settles) || settles.length === 0 || settles.length > max) return undefined;
  for (const settle of settles) if (acceptSettle(settle) === undefined) return undefined;
  return params as { settles: Array<NonNullable<ReturnType<typeof acceptSettle>>> };
}

function acceptEvent(event: unknown): event is EventInput {
  if (!isRecord(event)) return false;
  let required = 0;
  for (const key in event) {
    const value = event[key];
    if (key === 'domain' || key === 'name' || key === 'pid') {
      if (!isIdentifier(value)) return false;
      required++;
    } else if (key === 'id' || key === 'rid') {
      if (!isIdentifier(value)) return false;
    } else if (key === 'data') {
      if (!isRecord(value) || !isJsonRecord(value, 1)) return false;
    } else if (key === 'traceparent') {
      if (typeof value !== 'string' || !TRACEPARENT.test(value)) return false;
    } else if (key === 'tracestate') {
      if (typeof value !== 'string' || value.length > TRACESTATE_MAX_LENGTH || !isPrintable(value) || event.traceparent === undefined) return false;
    } else return false;
  }
  return required === 3;
}

/** Printable ASCII only (a tracestate). */
function isPrintable(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

/** `identifier`: 1..64 printable ASCII characters, no trailing space. */
function isIdentifier(value: unknown): value is string {
  if (typeof value !== 'string' || value.length === 0 || value.length > 64) return false;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x20 || c > 0x7e) return false;
  }
  return value.charCodeAt(value.length - 1) !== 0x20;
}

/** `count()`: z.int() (a safe integer) that is not negative. */
function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

/** A plain object (what z.record accepts of JSON.parse's output): not null, not an array. */
function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/**
 * `jsonObject`'s members: z.json() of JSON.parse's output refuses only non-finite numbers, and
 * jsonObject refuses an own `__proto__` key at any depth (data-keys.ts).
 */
function isJsonRecord(record: Record<string, unknown>, depth: number): boolean {
  if (depth > MAX_FAST_DEPTH || Object.hasOwn(record, FORBIDDEN_DATA_KEY)) return false;
  for (const key in record) if (!isJson(record[key], depth)) return false;
  return true;
}

function isJson(value: unknown, depth: number): value is Json {
  if (typeof value === 'number') return Number.isFinite(value);
  if (value === null || typeof value !== 'object') return typeof value === 'string' || typeof value === 'boolean' || value === null;
  if (!Array.isArray(value)) return isJsonRecord(value as Record<string, unknown>, depth + 1);
  if (depth + 1 > MAX_FAST_DEPTH) return false;
  for (let i = 0; i < value.length; i++) if (!isJson(value[i], depth + 1)) return false;
  return true;
}
