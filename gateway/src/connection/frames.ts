/**
 * Reading what a client sends: the frame (density check, JSON, the frame schema) and a request's
 * params (data shape, the operation's schema). Each step answers with the coded error frame the
 * client gets; nothing here has side effects.
 */
import { type OperationName } from '@eventflow/core';
import { clientFrame, describeIssues, isOperationName, operations } from '@eventflow/core/protocol';
import { en } from 'zod/locales';
import type { z } from 'zod/mini';
import { dataShapeRefusal, frameTooDense, scanFrame } from './data-shape.js';
import { MAX_SETTLE_BATCH } from '@eventflow/core';
import { acceptRequest, acceptSettle, acceptSettleMany, acceptWait, acceptWrite } from './fast-frames.js';
import type { ConnectionLimits } from './limits.js';
import { MAX_TOKEN_LENGTH } from './auth.js';

/** What a transport passes for a binary WebSocket frame: no text frame is this (not JSON, leading NUL). */
export const BINARY_FRAME = '\u0000binary';

/**
 * The protocol schemas are zod/mini, which carries no locale: parsing with zod's English error map
 * keeps the messages clients get (e.g. "Too big: expected string to have <=64 characters").
 */
const english = { error: en().localeError };

/** The operations that write events, and so spend the connection's publish rate. */
export const writes: ReadonlySet<OperationName> = new Set<OperationName>(['publish', 'persist', 'schedule']);

/**
 * The reads whose answer the protocol does not bound (a whole eventlog, every pid of a domain, …) or whose
 * cost grows with the store (the console's listings and counts). Each waits for a read turn (read-turns.ts),
 * so that requests sent together are not all read, and held, in the turn they arrive.
 */
export const unboundedReads: ReadonlySet<OperationName> = new Set<OperationName>([
  'readEventlog',
  'readEventlogState',
  'readEventlogByTimestamp',
  'readEventlogFilteredByNames',
  'readEventlogByChildProcess',
  'readEventlogByEid',
  'readEventlogByDomainAndEid',
  'readDistinctPidByDomain',
  'listDomains',
  'listProcesses',
  'readTimeline',
  'readLatency',
  'listScheduled',
  'groups',
  'deadLetters',
]);

/** The error frame's content for a refused frame or request. */
export interface Refusal {
  readonly kind: 'refused';
  readonly id: number | undefined;
  readonly code: string;
  readonly message: string;
  readonly details?: Record<string, unknown>;
}

export type ReadFrame =
  | Refusal
  | { readonly kind: 'hello'; readonly protocol: number; readonly client: string | undefined; readonly token: string | undefined }
  | { readonly kind: 'request'; readonly id: number; readonly op: OperationName; readonly params: unknown };

const refused = (id: number | undefined, code: string, message: string, details?: Record<string, unknown>): Refusal => ({ kind: 'refused', id, code, message, ...(details ? { details } : {}) });

/** A frame as the client sent it, or the refusal to answer with. `greeted`: the hello was accepted. */
export function readFrame(data: string, limits: ConnectionLimits, greeted: boolean): ReadFrame {
  // Parsing costs time per value: a frame with more values than any valid one is refused unparsed.
  const dense = scanFrame(data, limits);
  if (dense) {
    const error = frameTooDense(dense.limit, dense.value);
    return refused(dense.id, error.code, error.message, error.details);
  }
  let json: unknown;
  try {
    json = JSON.parse(data);
  } catch {
    return refused(undefined, 'E_EVENTFLOW_INVALID_FRAME', data === BINARY_FRAME ? 'binary frames are not part of the protocol; send JSON text frames' : 'frame is not valid JSON');
  }
  // The common frame, plainly valid, skips zod (fast-frames.ts); anything else zod judges and words.
  const fast = acceptRequest(json);
  if (fast !== undefined) return request(fast.id, fast.op, fast.params, greeted);
  const frame = clientFrame.safeParse(withoutLongToken(json), english);
  if (!frame.success) {
    const type = json !== null && typeof json === 'object' ? (json as { type?: unknown }).type : undefined;
    const message = type === 'hello' || type === 'request' ? describeIssues(frame.error) : `unknown frame type ${JSON.stringify(type ?? null)}; expected "hello" or "request"`;
    return refused(readId(json), 'E_EVENTFLOW_INVALID_FRAME', message);
  }
  if (frame.data.type === 'hello') return { kind: 'hello', protocol: frame.data.protocol, client: frame.data.client, token: longToken(json) ?? frame.data.token };
  return request(frame.data.id, frame.data.op, frame.data.params, greeted);
}

function request(id: number, op: string, params: unknown, greeted: boolean): ReadFrame {
  if (!greeted) return refused(id, 'E_EVENTFLOW_HANDSHAKE_REQUIRED', 'send a "hello" frame before any request');
  if (!isOperationName(op)) return refused(id, 'E_EVENTFLOW_UNKNOWN_OPERATION', `unknown operation ${JSON.stringify(op)}`);
  return { kind: 'request', id, op, params };
}

export type Params<O extends OperationName> = z.infer<(typeof operations)[O]['params']>;

/** A request's params validated for `op`, or the refusal to answer with. */
export function readParams<O extends OperationName>(id: number, op: O, params: unknown, limits: ConnectionLimits): { kind: 'params'; params: Params<O> } | Refusal {
  // Before validation walks it: an event's data is bounded in values and depth (data-shape.ts).
  const shape = writes.has(op) ? dataShapeRefusal(op, params, limits) : undefined;
  if (shape) return refused(id, shape.code, shape.message, shape.details);
  if (op === 'publish' || op === 'persist') {
    const fast = acceptWrite(params, op);
    if (fast !== undefined) return { kind: 'params', params: fast as Params<O> };
  } else if (op === 'wait') {
    const fast = acceptWait(params);
    if (fast !== undefined) return { kind: 'params', params: fast as Params<O> };
  } else if (op === 'settle' || op === 'settleMany') {
    const fast = op === 'settle' ? acceptSettle(params) : acceptSettleMany(params, MAX_SETTLE_BATCH);
    if (fast !== undefined) return { kind: 'params', params: fast as Params<O> };
  }
  let parsed;
  try {
    parsed = operations[op].params.safeParse(op === 'authenticate' ? withoutLongToken(params) : (params ?? {}), english);
  } catch (error) {
    // zod validates JSON recursively: absurdly deep nesting overflows the stack instead of failing.
    if (!(error instanceof RangeError)) throw error;
    return refused(id, 'E_EVENTFLOW_INVALID_INPUT', `${op}: params are nested too deeply`);
  }
  if (!parsed.success) return refused(id, 'E_EVENTFLOW_INVALID_INPUT', `${op}: ${describeIssues(parsed.error, 'params')}`);
  const token = op === 'authenticate' ? longToken(params) : undefined;
  return { kind: 'params', params: (token === undefined ? parsed.data : { token }) as Params<O> };
}

function readId(json: unknown): number | undefined {
  if (json === null || typeof json !== 'object') return undefined;
  const id = (json as { id?: unknown }).id;
  return typeof id === 'number' && Number.isSafeInteger(id) && id >= 0 ? id : undefined;
}

/**
 * A token longer than the protocol's 8192 characters (in `hello` or `authenticate`) is a token the
 * gateway refuses as E_EVENTFLOW_UNAUTHORIZED (auth.ts says why and what to do; hello closes 4401), not
 * a malformed frame: refused as one, the connection waited for another hello until its handshake
 * timeout and the client reconnected with the same token, told only zod's "Too big".
 */
function longToken(json: unknown): string | undefined {
  const token = json !== null && typeof json === 'object' ? (json as { token?: unknown }).token : undefined;
  return typeof token === 'string' && token.length > MAX_TOKEN_LENGTH ? token : undefined;
}

/** `json` with a long token (longToken) shortened, so that the rest of the frame is judged as sent. */
function withoutLongToken(json: unknown): unknown {
  return longToken(json) === undefined ? json : { ...(json as object), token: 'x' };
}
