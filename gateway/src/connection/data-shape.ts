/**
 * EVENTFLOW_MAX_DATA_KEYS and EVENTFLOW_MAX_DATA_DEPTH: bounds on an event's `data` checked in one
 * walk right after the frame is parsed, before validation, storing, folding and fan-out, each of
 * which costs time per value. The walk uses its own stack (no recursion to overflow) and stops at
 * the first value over a limit, so a refused frame costs at most `maxKeys` steps.
 *
 * The same walk refuses a key or string that is not well-formed Unicode (a lone UTF-16 surrogate,
 * which JSON can carry as `\ud83d`): MariaDB's JSON_VALID, the check on v4's `event.data`, refuses
 * the document (the publish failed as a store failure, which a client retries in vain), while SQLite
 * kept it; such text is refused alike on both stores instead.
 */
import { EventflowError } from '@eventflow/core';

export interface DataShapeLimits {
  readonly maxDataKeys: number;
  readonly maxDataDepth: number;
}

/** What is wrong with `data`, where: a limit breached, text that is not well-formed Unicode, or a number a double cannot hold. */
export type DataShapeBreach = { path: string; limit: string; value: number } | { path: string; limit: undefined; value: undefined; number?: true };

/** String.prototype.isWellFormed (ES2024: Node 20 has it; the project's lib is ES2023). */
const wellFormed = (text: string): boolean => (text as string & { isWellFormed(): boolean }).isWellFormed();

/** The breach of `data`: where and which limit (none: not well-formed text); undefined when within both. */
export function dataShapeBreach(data: unknown, limits: DataShapeLimits, root = 'data'): DataShapeBreach | undefined {
  if (data === null || typeof data !== 'object') return undefined;
  // The path is rebuilt only on a breach: each entry keeps its parent and its key.
  interface Entry {
    value: object;
    depth: number;
    parent: Entry | undefined;
    key: string | number | undefined;
  }
  const path = (entry: Entry, key?: string | number): string => {
    const keys: Array<string | number> = key === undefined ? [] : [key];
    for (let at: Entry | undefined = entry; at?.key !== undefined; at = at.parent) keys.push(at.key);
    const full = keys
      .reverse()
      .reduce<string>((text, part) => (typeof part === 'number' ? `${text}[${part}]` : /^[A-Za-z_$][\w$]*$/.test(part) ? `${text}.${part.slice(0, 64)}` : `${text}[${JSON.stringify(part.slice(0, 64))}]`), root);
    // Keys are the client's: an error message stays short however long or deep they are.
    return full.length > 300 ? `${full.slice(0, 300)}…` : full;
  };
  const stack: Entry[] = [{ value: data, depth: 1, parent: undefined, key: undefined }];
  let values = 0;
  while (stack.length > 0) {
    const entry = stack.pop() as Entry;
    if (entry.depth > limits.maxDataDepth) return { path: path(entry), limit: 'EVENTFLOW_MAX_DATA_DEPTH', value: limits.maxDataDepth };
    const visit = (key: string | number, child: unknown): DataShapeBreach | undefined => {
      if (++values > limits.maxDataKeys) return { path: path(entry, key), limit: 'EVENTFLOW_MAX_DATA_KEYS', value: limits.maxDataKeys };
      if ((typeof key === 'string' && !wellFormed(key)) || (typeof child === 'string' && !wellFormed(child))) return { path: path(entry, key), limit: undefined, value: undefined };
      // JSON.parse reads 1e999 as Infinity, which no store keeps (zod's answer was a bare "Invalid input" at the parent).
      if (typeof child === 'number' && !Number.isFinite(child)) return { path: path(entry, key), limit: undefined, value: undefined, number: true };
      if (child !== null && typeof child === 'object') stack.push({ value: child, depth: entry.depth + 1, parent: entry, key });
      return undefined;
    };
    if (Array.isArray(entry.value)) {
      for (let index = 0; index < entry.value.length; index++) {
        const breach = visit(index, entry.value[index]);
        if (breach) return breach;
      }
    } else {
      for (const key in entry.value) {
        if (!Object.hasOwn(entry.value, key)) continue;
        const breach = visit(key, (entry.value as Record<string, unknown>)[key]);
        if (breach) return breach;
      }
    }
  }
  return undefined;
}

/** E_EVENTFLOW_INVALID_INPUT for a publish/persist/schedule whose `params.event.data` breaches a limit; undefined otherwise. */
export function dataShapeRefusal(op: string, params: unknown, limits: DataShapeLimits): EventflowError | undefined {
  const event = params !== null && typeof params === 'object' ? (params as { event?: unknown }).event : undefined;
  const data = event !== null && typeof event === 'object' ? (event as { data?: unknown }).data : undefined;
  const breach = dataShapeBreach(data, limits, 'params.event.data');
  if (!breach) return undefined;
  if (breach.limit === undefined && breach.number) {
    return new EventflowError(
      'E_EVENTFLOW_INVALID_INPUT',
      `${op}: event data holds a number too large for a double (JSON numbers are read as IEEE doubles; this one is read as Infinity), at ${breach.path}; send it as a string`,
      { details: { path: breach.path } },
    );
  }
  if (breach.limit === undefined) {
    return new EventflowError(
      'E_EVENTFLOW_INVALID_INPUT',
      `${op}: event data holds a key or string that is not well-formed Unicode (a lone UTF-16 surrogate: half of a character such as an emoji, often left by cutting a string), at ${breach.path}; send whole characters`,
      { details: { path: breach.path } },
    );
  }
  const what = breach.limit === 'EVENTFLOW_MAX_DATA_KEYS' ? `more than ${breach.value} values (object members and array elements, at any depth)` : `nesting deeper than ${breach.value} levels`;
  return new EventflowError('E_EVENTFLOW_INVALID_INPUT', `${op}: event data has ${what}, at ${breach.path} (${breach.limit}=${breach.value}); make the event smaller or split it`, {
    details: { path: breach.path, limit: breach.limit, value: breach.value },
  });
}

/** Values a frame may hold beyond its event data: the envelope (type, id, op, params, the event's fields). */
const FRAME_VALUES = 1_000;

/**
 * The value bound on the raw frame, before JSON.parse: parsing costs time per value (a 1 MiB frame
 * of 60,000 keys takes ~110-220 ms here), so a frame that cannot be within EVENTFLOW_MAX_DATA_KEYS
 * (plus FRAME_VALUES for the envelope) is refused without being parsed. One pass over the text, no
 * allocation, strings skipped with indexOf: it counts commas and opening brackets outside strings
 * (values ≤ commas + containers) and stops at the bound (~3 ms for that 1 MiB frame, well under
 * 1 ms for one within the bound). It does not judge validity (JSON.parse does) nor depth (cheap to
 * parse; the walk above bounds it in event data). It reads a top-level `"id":<digits>` met before
 * stopping, so that the refusal carries the request id (clients put `type` and `id` first).
 */
export function scanFrame(text: string, limits: DataShapeLimits): { limit: string; value: number; id: number | undefined } | undefined {
  const maxValues = limits.maxDataKeys + FRAME_VALUES;
  let depth = 0;
  let values = 0;
  let id: number | undefined;
  /** Where the last string at depth 1 started, when it was `"id"`: the id's digits follow its colon. */
  let afterIdKey = -1;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // A string: skip to its closing quote, over escapes.
      const start = i;
      i = closingQuote(text, i);
      if (depth === 1 && i - start === 3 && text.charCodeAt(start + 1) === 0x69 && text.charCodeAt(start + 2) === 0x64) afterIdKey = i + 1;
      continue;
    }
    if (c === 0x7b || c === 0x5b) {
      depth++;
      if (++values > maxValues) return { limit: 'EVENTFLOW_MAX_DATA_KEYS', value: limits.maxDataKeys, id };
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
    } else if (c === 0x2c) {
      if (++values > maxValues) return { limit: 'EVENTFLOW_MAX_DATA_KEYS', value: limits.maxDataKeys, id };
    } else if (c === 0x3a && afterIdKey >= 0) {
      const match = /^\s*(\d{1,15})/.exec(text.slice(i + 1, i + 32));
      if (match) id = Number(match[1]);
      afterIdKey = -1;
    }
  }
  return undefined;
}

/** The index of the quote closing the string that opens at `open` (text.length when unterminated); native indexOf does the scanning. */
function closingQuote(text: string, open: number): number {
  let at = text.indexOf('"', open + 1);
  while (at > 0) {
    let backslashes = 0;
    while (text.charCodeAt(at - 1 - backslashes) === 0x5c) backslashes++;
    if (backslashes % 2 === 0) return at;
    at = text.indexOf('"', at + 1);
  }
  return text.length;
}

/** E_EVENTFLOW_INVALID_INPUT for a frame scanFrame refused. */
export function frameTooDense(limit: string, value: number): EventflowError {
  return new EventflowError(
    'E_EVENTFLOW_INVALID_INPUT',
    `the frame holds more values than any valid request: event data may hold ${value} (${limit}=${value}), the rest of a frame ${FRAME_VALUES}; make the event smaller or split it`,
    { details: { path: 'frame', limit, value } },
  );
}
