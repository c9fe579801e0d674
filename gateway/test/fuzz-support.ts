/**
 * A seeded generator of bad frames for the fuzz suite (fuzz.test.ts). Every frame it yields is
 * under the frame limit and is never a well-formed request or hello: each must get exactly one
 * error frame, whose code and id the generator predicts.
 */
import type { OperationName } from '@eventflow/core';
import { isOperationName, operationNames, operations } from '@eventflow/core/protocol';

/** A small seeded PRNG so that a failing run can be reproduced. */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const categories = [
  'malformedJson',
  'truncated',
  'wrongType',
  'unknownOp',
  'unknownType',
  'envelope',
  'hugeNumber',
  'deepNesting',
  'binary',
  'invalidIdentifier',
] as const;
export type Category = (typeof categories)[number];

export interface FuzzFrame {
  category: Category;
  data: string | Buffer;
  /** The error code the gateway must answer with. */
  code: 'E_EVENTFLOW_INVALID_FRAME' | 'E_EVENTFLOW_INVALID_INPUT' | 'E_EVENTFLOW_UNKNOWN_OPERATION';
  /** The request id the error must carry; undefined = the error carries no id. */
  id: number | undefined;
}

type Kind = 'ident' | 'handle' | 'token' | 'pos' | 'posInt' | 'iso' | 'event' | 'names' | 'outcome' | 'settleError' | 'credit' | 'bool' | 'retry' | 'settles' | 'slowest';

/**
 * The params of every operation, with each field's kind (optional fields included). The fuzz test
 * checks that this names exactly the operations in `operations`, so a new operation needs a line here.
 */
export const templates: Partial<Record<OperationName, Record<string, Kind>>> = {
  publish: { event: 'event', expectedVersion: 'pos' },
  persist: { event: 'event', expectedVersion: 'pos' },
  schedule: { at: 'iso', event: 'event' },
  subscribe: { domain: 'ident', name: 'ident', after: 'pos', last: 'posInt' },
  unsubscribe: { domain: 'ident', name: 'ident' },
  subscribePattern: { subscription: 'handle', pattern: 'ident', names: 'names', pid: 'ident', after: 'pos' },
  unsubscribePattern: { subscription: 'handle' },
  consume: { consumer: 'handle', domain: 'ident', name: 'ident', after: 'pos', group: 'ident', concurrency: 'credit', ordered: 'bool', retry: 'retry' },
  removeConsumer: { consumer: 'handle' },
  settle: { delivery: 'handle', outcome: 'outcome', delayMs: 'posInt', error: 'settleError' },
  settleMany: { settles: 'settles' },
  extend: { delivery: 'handle', ms: 'posInt' },
  wait: { wait: 'handle', domain: 'ident', pid: 'ident', names: 'names', afterId: 'ident', afterPosition: 'pos', request: 'ident' },
  cancelWait: { wait: 'handle' },
  delete: { id: 'ident' },
  deleteEventlog: { domain: 'ident', pid: 'ident' },
  read: { id: 'ident' },
  readEventlog: { domain: 'ident', pid: 'ident', after: 'pos' },
  readEventlogState: { domain: 'ident', pid: 'ident' },
  readEventlogByTimestamp: { domain: 'ident', pid: 'ident', from: 'iso', to: 'iso' },
  readEventlogFilteredByNames: { domain: 'ident', pid: 'ident', names: 'names' },
  readEventlogByChildProcess: { domain: 'ident', cpid: 'ident' },
  readEventlogByEid: { eid: 'ident' },
  readEventlogByDomainAndEid: { domain: 'ident', eid: 'ident' },
  readDistinctPidByDomain: { domain: 'ident' },
  persistEntityAssociation: { eventId: 'ident', eid: 'ident' },
  persistChildProcessAssociation: { eventId: 'ident', domain: 'ident', cpid: 'ident' },
  ping: {},
  authenticate: { token: 'token' },
  listDomains: {},
  listProcesses: { domain: 'ident', after: 'ident', limit: 'posInt' },
  readTimeline: { domain: 'ident', pid: 'ident', after: 'pos', limit: 'posInt' },
  readLatency: { domain: 'ident', name: 'ident', group: 'ident', windowMs: 'posInt', slowest: 'slowest' },
  listScheduled: { domain: 'ident', limit: 'posInt' },
  cancelScheduled: { id: 'ident' },
  gatewayStats: {},
  groups: { domain: 'ident' },
  deleteGroup: { domain: 'ident', name: 'ident', group: 'ident' },
  deadLetters: { domain: 'ident', limit: 'posInt', offset: 'pos' },
  requeueDeadLetter: { eventId: 'ident', domain: 'ident', name: 'ident', group: 'ident' },
  discardDeadLetter: { eventId: 'ident', domain: 'ident', name: 'ident', group: 'ident' },
} as Record<string, Record<string, Kind>>;

const validEvent = { id: 'fz-1', domain: 'orders', name: 'placed', pid: 'p1', data: { amount: 1 }, rid: 'fz-0' };
const eventKinds: Record<string, Kind> = { id: 'ident', domain: 'ident', name: 'ident', pid: 'ident', rid: 'ident' };

const validValues: Record<Kind, unknown> = {
  ident: 'orders',
  handle: 'h-1',
  token: 'not.a.jwt',
  pos: 3,
  posInt: 1000,
  iso: '2026-01-01T00:00:00.000Z',
  event: validEvent,
  names: ['placed', 'paid'],
  // The outcome that takes every optional settle field (delayMs goes with retry only).
  outcome: 'retry',
  settleError: { message: 'boom', code: 'X' },
  credit: 8,
  bool: true,
  retry: { attempts: 3, backoff: 'fixed', delayMs: 10, maxDelayMs: 100 },
  settles: [{ delivery: 'h-1', outcome: 'success' }],
  slowest: 10,
};

/** Valid params for `op` with every optional field present. */
export function validParams(op: OperationName): Record<string, unknown> {
  return Object.fromEntries(Object.entries(templates[op] ?? {}).map(([field, kind]) => [field, structuredClone(validValues[kind])]));
}

/** A JSON number literal that JSON.stringify cannot write (e.g. 1e400), substituted after stringify. */
const RAW = '@@raw@@';
const raw = (literal: string): string => `${RAW}${literal}${RAW}`;
const rawPattern = new RegExp(`"${RAW}(.*?)${RAW}"`, 'g');
const stringify = (value: unknown): string => JSON.stringify(value).replace(rawPattern, '$1');

const nonString: unknown[] = [5, -1, 1.5, 0, true, false, null, [], {}, ['a'], { a: 'b' }, raw('1e400'), raw('123456789012345678901234567890')];
const nonNumber: unknown[] = ['x', '5', '', true, false, null, [], {}, [1], { a: 1 }];
const badNumbers: unknown[] = [-1, 1.5, -0.5, 2 ** 53, 2 ** 64, 1e308, -1e308, raw('1e400'), raw('-1e400'), -9007199254740993, raw('99999999999999999999999999')];
export const badIdentifiers: string[] = [
  '',
  'a'.repeat(65),
  'x'.repeat(1000),
  'ordér',
  'order-📦',
  'a\u001eb',
  'a\u001fb',
  'a\nb',
  'a\tb',
  'a\u0000b',
  'a\u007fb',
  'order ',
  ' ',
  '\ud800',
  'a\udfffb',
  '\u00a0',
  '\u200b',
];

function pools(kind: Kind): unknown[] {
  switch (kind) {
    case 'ident':
      return [...nonString, ...badIdentifiers];
    case 'handle':
      return [...nonString, '', 'h'.repeat(65)];
    case 'token':
      return [...nonString, ''];
    case 'pos':
      return [...nonNumber, ...badNumbers];
    case 'posInt':
      return [...nonNumber, ...badNumbers, 0];
    case 'iso':
      return [...nonString, 'yesterday', '', '2026-01-01', '2026-13-45T99:99:99Z', 'T', 1767225600000];
    case 'outcome':
      return [...nonString, 'done', '', 'SUCCESS', 'success '];
    case 'names':
      return [...nonNumber.filter((v) => !Array.isArray(v) || v.length > 0), [], [5], ['ok', ''], ['ok', 'a'.repeat(65)], Array.from({ length: 300 }, () => 'n'), [null]];
    case 'settleError':
      return [...nonString.filter((v) => !(v !== null && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length === 0)), { message: 5 }, { code: 'x' }, { message: 'x', code: 5 }, { message: 'x', extra: 1 }, { message: 'x', code: 'c'.repeat(129) }];
    case 'event':
      return [5, 'x', null, [], true, [validEvent]];
    case 'slowest':
      return [...nonNumber, ...badNumbers, 0, 101];
    case 'credit':
      return [...nonNumber, ...badNumbers, 1001];
    case 'bool':
      return [5, 'x', 'true', 0, 1, null, [], {}];
    case 'retry':
      return [5, 'x', null, [], {}, { attempts: 0 }, { attempts: 101 }, { attempts: 1.5 }, { attempts: 3, backoff: 'linear' }, { attempts: 3, extra: 1 }, { attempts: 3, delayMs: -1 }, { attempts: 3, maxDelayMs: 86_400_001 }];
    case 'settles':
      return [5, 'x', null, {}, [], [{}], [5], [{ delivery: 'h', outcome: 'done' }], [{ delivery: '', outcome: 'success' }], Array.from({ length: 257 }, () => ({ delivery: 'h', outcome: 'success' }))];
  }
}

export interface Generator {
  next(): FuzzFrame;
  /** Frames yielded so far per category. */
  readonly counts: Record<Category, number>;
}

export function createGenerator(seed: number, maxBytes: number): Generator {
  const random = mulberry32(seed);
  const int = (max: number): number => Math.floor(random() * max);
  const pick = <T>(items: readonly T[]): T => items[int(items.length)]!;
  const counts = Object.fromEntries(categories.map((c) => [c, 0])) as Record<Category, number>;
  let nextId = 1;
  const requestId = (): number => (random() < 0.05 ? Number.MAX_SAFE_INTEGER - int(1000) : nextId++);
  const randomOp = (): OperationName => pick(operationNames);

  const randomString = (length: number, maxCode: number): string => Array.from({ length }, () => String.fromCharCode(int(maxCode))).join('');

  /** A mutated copy of `value` of `kind` that the schema must refuse. */
  const wrong = (kind: Kind, value: unknown): unknown => {
    if (kind === 'event' && random() < 0.7) {
      const event = { ...(value as Record<string, unknown>) };
      const roll = int(5);
      if (roll === 0) event[pick(['data'])] = pick([[], 'text', null, 5, true, [1, 2]]);
      else if (roll === 1) event[pick(['colour', 'position', 'timestamp', '__proto__x'])] = 'red';
      else if (roll === 2) delete event[pick(['domain', 'name', 'pid'])];
      else event[pick(Object.keys(eventKinds))] = pick(pools('ident'));
      return event;
    }
    return structuredClone(pick(pools(kind)));
  };

  /** Params for `op` with one field wrong (or the whole params wrong); never valid. */
  const wrongParams = (op: OperationName, identOnly: boolean): unknown => {
    for (;;) {
      const params: Record<string, unknown> = validParams(op);
      const fields = Object.entries(templates[op] ?? {}).filter(([, kind]) => !identOnly || kind === 'ident' || kind === 'event');
      let result: unknown = params;
      const roll = random();
      if (identOnly) {
        if (fields.length === 0) return undefined;
        const [field, kind] = pick(fields);
        if (kind === 'event') params[field] = { ...validEvent, [pick(Object.keys(eventKinds))]: pick(badIdentifiers) };
        else params[field] = pick(badIdentifiers);
      } else if (fields.length === 0 || roll < 0.08) {
        result = pick<unknown>(fields.length === 0 ? [[], 'x', 5, true, { extra: 1 }, [{}]] : [[], 'x', 5, true, {}, [params]]);
      } else if (roll < 0.16) {
        params[pick(['extra', 'Event', 'id', 'type', 'op', 'constructor'])] = 1;
      } else if (roll < 0.24) {
        const required = fields.filter(([field]) => !(operations[op].params.shape as Record<string, { _zod: { optin?: string } }>)[field]?._zod.optin);
        if (required.length === 0) continue;
        delete params[pick(required)[0]];
      } else {
        const [field, kind] = pick(fields);
        params[field] = wrong(kind, params[field]);
      }
      // The generator must never produce a valid request: the schema is only used to filter here.
      if (!operations[op].params.safeParse(JSON.parse(stringify(result ?? {}))).success) return result;
    }
  };

  const request = (op: unknown, params: unknown, id: unknown = requestId()): Record<string, unknown> => ({ type: 'request', id, op, params });

  const deep = (depth: number): string => {
    const kind = int(3);
    if (kind === 0) return '['.repeat(depth) + ']'.repeat(depth);
    if (kind === 1) return '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
    return '[{"a":'.repeat(depth) + 'null' + '}]'.repeat(depth);
  };

  const make = (category: Category): Omit<FuzzFrame, 'category'> | undefined => {
    switch (category) {
      case 'malformedJson': {
        const roll = int(6);
        let text: string;
        if (roll === 0) text = randomString(1 + int(200), 0xd800);
        else if (roll === 1) text = randomString(1 + int(64), 0x80);
        else if (roll === 2) {
          const tokens = ['{', '}', '[', ']', ':', ',', '"type"', '"request"', '"id"', '1', 'NaN', 'undefined', "'x'", 'tru', 'nul', '"', '\\', '0x10', '-', '1e', '.5', 'Infinity'];
          text = Array.from({ length: 1 + int(30) }, () => pick(tokens)).join(pick(['', ' ', ',']));
        } else if (roll === 3) text = stringify(request(randomOp(), validParams(randomOp()))).replace(/,/, pick([',,', ', }', ':', ''])) + pick(['', ',', '}']);
        else if (roll === 4) text = `${stringify(request('ping', {}))}${pick(['x', '{}', ' 1', ']'])}`;
        else text = pick(['', ' ', '\u0000', '\ufeff{}x', '{"type":"request",}', '{type:"request"}', "{'type':'request'}", '{"type":"request","id":01,"op":"ping"}']);
        try {
          JSON.parse(Buffer.from(text).toString());
          return undefined; // parsed by chance: not malformed
        } catch {
          return { data: text, code: 'E_EVENTFLOW_INVALID_FRAME', id: undefined };
        }
      }
      case 'truncated': {
        const valid = random() < 0.1 ? stringify({ type: 'hello', protocol: 1, client: 'fuzz' }) : stringify(request(randomOp(), random() < 0.5 ? validParams(randomOp()) : wrongParams(randomOp(), false)));
        return { data: valid.slice(0, int(valid.length)), code: 'E_EVENTFLOW_INVALID_FRAME', id: undefined };
      }
      case 'wrongType': {
        const op = randomOp();
        const id = requestId();
        const params = wrongParams(op, false);
        return { data: stringify(request(op, params, id)), code: 'E_EVENTFLOW_INVALID_INPUT', id };
      }
      case 'invalidIdentifier': {
        const op = pick(operationNames.filter((name) => Object.values(templates[name] ?? {}).some((kind) => kind === 'ident' || kind === 'event')));
        const id = requestId();
        return { data: stringify(request(op, wrongParams(op, true), id)), code: 'E_EVENTFLOW_INVALID_INPUT', id };
      }
      case 'unknownOp': {
        const id = requestId();
        const roll = int(4);
        let op: string;
        if (roll === 0) op = pick(['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf', 'PUBLISH', 'publish ', ' ping', 'Ping', '', 'ping\u0000', 'publïsh', 'read\n']);
        else if (roll === 1) op = randomString(1 + int(64), 0x7f);
        else if (roll === 2) op = `${randomOp()}${pick(['s', 'X', '_', '.', '/'])}`;
        else {
          // Over 64 characters: the envelope itself is invalid.
          const long = 'op'.repeat(33 + int(100));
          return { data: stringify(request(long, {}, id)), code: 'E_EVENTFLOW_INVALID_FRAME', id };
        }
        if (isOperationName(op)) return undefined;
        return { data: stringify(request(op, validParams(randomOp()), id)), code: 'E_EVENTFLOW_UNKNOWN_OPERATION', id };
      }
      case 'unknownType': {
        const type = pick<unknown>(['bogus', 'Request', 'REQUEST', 'hello ', 'welcome', 'result', 'error', 'event', 'delivery', '', 'request\u0000', 7, null, true, [], {}, ['request'], randomString(1 + int(20), 0x7f)]);
        if (type === 'hello' || type === 'request') return undefined;
        const withId = random() < 0.5;
        const id = withId ? requestId() : undefined;
        const frame: Record<string, unknown> = { type, ...(withId ? { id } : {}), op: randomOp(), params: validParams(randomOp()) };
        if (random() < 0.2) delete frame.type;
        return { data: stringify(frame), code: 'E_EVENTFLOW_INVALID_FRAME', id };
      }
      case 'envelope': {
        const id = requestId();
        const roll = int(6);
        if (roll === 0) {
          const badId = pick<unknown>([-1, 1.5, '7', 2 ** 53, null, [], {}, true, raw('1e400'), raw('-0.0001'), '']);
          return { data: stringify(request('ping', {}, badId)), code: 'E_EVENTFLOW_INVALID_FRAME', id: undefined };
        }
        if (roll === 1) {
          const frame: Record<string, unknown> = request('ping', {}, id);
          delete frame.id;
          return { data: stringify(frame), code: 'E_EVENTFLOW_INVALID_FRAME', id: undefined };
        }
        if (roll === 2) return { data: stringify(request(pick<unknown>([42, null, true, [], { op: 'ping' }, ['ping']]), {}, id)), code: 'E_EVENTFLOW_INVALID_FRAME', id };
        if (roll === 3) return { data: stringify({ ...request(randomOp(), validParams(randomOp()), id), [pick(['extra', 'ID', 'meta', 'params2'])]: pick([1, null, 'x']) }), code: 'E_EVENTFLOW_INVALID_FRAME', id };
        if (roll === 4) {
          const frame: Record<string, unknown> = request('ping', {}, id);
          delete frame.op;
          return { data: stringify(frame), code: 'E_EVENTFLOW_INVALID_FRAME', id };
        }
        // Hellos that fail validation (a valid hello after the handshake is ignored by design, so none is sent).
        const hello = pick<Record<string, unknown>>([
          { type: 'hello', protocol: 'one' },
          { type: 'hello', protocol: 1.5 },
          { type: 'hello', protocol: null },
          { type: 'hello' },
          { type: 'hello', protocol: 1, client: 5 },
          { type: 'hello', protocol: 1, client: 'c'.repeat(129) },
          { type: 'hello', protocol: 1, extra: true },
          { type: 'hello', protocol: raw('1e400') },
          { type: 'hello', protocol: 1, id },
        ]);
        return { data: stringify(hello), code: 'E_EVENTFLOW_INVALID_FRAME', id: hello.id === id ? id : undefined };
      }
      case 'hugeNumber': {
        const id = requestId();
        const roll = int(3);
        const huge = pick<unknown>([2 ** 53, 2 ** 64, 1e308, raw('1e400'), raw('-1e400'), raw('123456789012345678901234567890123456789'), raw('1' + '0'.repeat(400))]);
        if (roll === 0) return { data: stringify(request('ping', {}, huge)), code: 'E_EVENTFLOW_INVALID_FRAME', id: undefined };
        const op = pick(operationNames.filter((name) => Object.values(templates[name] ?? {}).some((kind) => kind === 'pos' || kind === 'posInt')));
        const params = validParams(op);
        const [field] = pick(Object.entries(templates[op] ?? {}).filter(([, kind]) => kind === 'pos' || kind === 'posInt'));
        params[field] = huge;
        if (roll === 2) params[field] = raw(`${int(2) === 0 ? '-' : ''}${'9'.repeat(20 + int(300))}`);
        return { data: stringify(request(op, params, id)), code: 'E_EVENTFLOW_INVALID_INPUT', id };
      }
      case 'deepNesting': {
        const id = requestId();
        const nested = deep(50 + int(400));
        const roll = int(6);
        if (roll === 0) return { data: nested, code: 'E_EVENTFLOW_INVALID_FRAME', id: undefined };
        if (roll === 1) return { data: `{"type":${nested},"id":${id}}`, code: 'E_EVENTFLOW_INVALID_FRAME', id };
        if (roll === 2) return { data: `{"type":"request","id":${nested},"op":"ping","params":{}}`, code: 'E_EVENTFLOW_INVALID_FRAME', id: undefined };
        if (roll === 3) return { data: `{"type":"request","id":${id},"op":"ping","params":${nested}}`, code: 'E_EVENTFLOW_INVALID_INPUT', id };
        if (roll === 4) return { data: `{"type":"request","id":${id},"op":"publish","params":{"event":{"domain":"bad ","name":"placed","pid":"p1","data":{"deep":${nested}}}}}`, code: 'E_EVENTFLOW_INVALID_INPUT', id };
        const op = randomOp();
        const fields = Object.keys(templates[op] ?? {});
        const field = fields.length > 0 ? pick(fields) : 'x';
        return { data: `{"type":"request","id":${id},"op":"${op}","params":{"${field}":${nested}}}`, code: 'E_EVENTFLOW_INVALID_INPUT', id };
      }
      case 'binary': {
        const roll = int(3);
        const bytes =
          roll === 0
            ? Buffer.from(stringify(request('ping', {})))
            : roll === 1
              ? Buffer.from(Array.from({ length: int(512) }, () => int(256)))
              : Buffer.from(stringify(request('publish', { event: validEvent })));
        return { data: bytes, code: 'E_EVENTFLOW_INVALID_FRAME', id: undefined };
      }
    }
  };

  return {
    counts,
    next() {
      for (;;) {
        const category = pick(categories);
        const frame = make(category);
        if (frame === undefined) continue;
        const bytes = typeof frame.data === 'string' ? Buffer.byteLength(frame.data) : frame.data.length;
        if (bytes >= maxBytes) continue;
        counts[category]++;
        return { category, ...frame };
      }
    },
  };
}

/** Frames over `maxBytes`: each must close its connection with 1009. */
export function oversizedFrames(seed: number, maxBytes: number, count: number): Array<string | Buffer> {
  const random = mulberry32(seed);
  const int = (max: number): number => Math.floor(random() * max);
  return Array.from({ length: count }, (_, i) => {
    const size = maxBytes + 1 + int(i % 4 === 0 ? 100_000 : 4 * maxBytes);
    switch (i % 5) {
      case 0:
        return JSON.stringify({ type: 'request', id: i, op: 'publish', params: { event: { domain: 'orders', name: 'placed', pid: 'p1', data: { blob: 'x'.repeat(size) } } } });
      case 1:
        return '['.repeat(size);
      case 2:
        return Buffer.alloc(size, 0x7b);
      case 3:
        return JSON.stringify({ type: 'request', id: i, op: 'ping', params: { pad: 'y'.repeat(size) } });
      default:
        return 'z'.repeat(size);
    }
  });
}
