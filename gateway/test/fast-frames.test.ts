/**
 * The hand-written acceptors (fast-frames.ts) against zod, the source of truth: on generated valid
 * and invalid envelopes and publish/persist params, whatever the fast path accepts zod accepts
 * with an equal value, and what zod accepts in the common shape the fast path accepts too (else it
 * would not be the fast path). Refusals are zod's by construction: the fast path never refuses.
 */
import { describe, expect, it } from 'vitest';
import { operations, requestFrame } from '@eventflow/core/protocol';
import { acceptRequest, acceptSettle, acceptWait, acceptWrite } from '../src/connection/fast-frames.js';
import { badIdentifiers, createGenerator, mulberry32 } from './fuzz-support.js';

const random = mulberry32(0xfa57);
const int = (max: number): number => Math.floor(random() * max);
const pick = <T>(items: readonly T[]): T => items[int(items.length)]!;

/** Printable ASCII identifiers at the edges: 1 and 64 characters, spaces inside, punctuation. */
function identifier(): string {
  const length = pick([1, 2, 8, 63, 64, 1 + int(64)]);
  let text = '';
  for (let i = 0; i < length; i++) text += String.fromCharCode(0x20 + int(0x5f));
  return text.endsWith(' ') ? `${text.slice(0, -1)}x` : text;
}

/** Any JSON value as JSON.stringify writes it, nested up to `depth`. */
function jsonValue(depth: number): unknown {
  const roll = int(depth > 0 ? 9 : 6);
  if (roll === 0) return null;
  if (roll === 1) return random() < 0.5;
  if (roll === 2) return pick([0, -0, 1, -1, 1.5, 2 ** 53, -1e308, 1e-300, int(1e9)]);
  if (roll === 3) return pick(['', 'x', '__proto__', 'ü📦', '\u0000', 'a'.repeat(300)]);
  if (roll === 4 || roll === 5) return identifier();
  if (roll === 6) return Array.from({ length: int(4) }, () => jsonValue(depth - 1));
  return jsonRecord(depth - 1);
}

function jsonRecord(depth: number): Record<string, unknown> {
  const record: Record<string, unknown> = {};
  for (let i = int(5); i > 0; i--) record[pick(['a', 'constructor', 'prototype', 'toString', '', 'ü', identifier()])] = jsonValue(depth);
  return record;
}

function validEvent(): Record<string, unknown> {
  const event: Record<string, unknown> = { domain: identifier(), name: identifier(), pid: identifier() };
  if (random() < 0.7) event.id = identifier();
  if (random() < 0.7) event.data = jsonRecord(int(6));
  if (random() < 0.3) event.rid = identifier();
  if (random() < 0.3) {
    event.traceparent = `00-${hex(32)}-${hex(16)}-${pick(['00', '01', 'ff'])}`;
    if (random() < 0.5) event.tracestate = pick(['', 'vendor=abc', 'a=1,b=2', 'x'.repeat(512)]);
  }
  return event;
}

function hex(length: number): string {
  let text = '';
  while (text.length < length) text += int(16).toString(16);
  return text.replace(/^0+$/, '1'.padStart(length, '0'));
}

function validWrite(op: 'publish' | 'persist'): Record<string, unknown> {
  const params: Record<string, unknown> = { event: validEvent() };
  if (random() < 0.3) params.expectedVersion = pick([0, 1, int(1e6), Number.MAX_SAFE_INTEGER]);
  if (op === 'publish' && random() < 0.3) params.requireConsumer = random() < 0.5;
  return params;
}

/** Text that JSON.stringify cannot write: a number literal beyond double range. */
const INFINITE = '@@inf@@';

/** One change that may or may not make `params` invalid; zod decides which. */
function mutate(params: Record<string, unknown>): string {
  const event = params.event as Record<string, unknown>;
  const roll = int(13);
  if (roll === 0) event[pick(['domain', 'name', 'pid', 'id', 'rid'])] = pick([...badIdentifiers, 5, null, true, [], {}, ['a']]);
  else if (roll === 1) delete event[pick(['domain', 'name', 'pid', 'id', 'data'])];
  else if (roll === 2) event[pick(['colour', 'position', 'timestamp', 'type', '__proto__'])] = 'x';
  else if (roll === 3) event.data = pick([[], [1], 'text', null, 5, true]);
  else if (roll === 4) params[pick(['extra', 'Event', 'requireConsumer', 'expectedVersion', '__proto__'])] = pick([1, 'x', null, true, -1, 1.5, 2 ** 53, -0, {}]);
  else if (roll === 5) params.event = pick([5, 'x', null, [], true, [event]]);
  else if (roll === 6) {
    // `__proto__` or an infinite number somewhere inside the data.
    const data = (event.data ??= {}) as Record<string, unknown>;
    const inner = random() < 0.5 ? data : ((data.inner = pick([{}, []])) as Record<string, unknown>);
    if (Array.isArray(inner)) inner.push(random() < 0.5 ? INFINITE : { ['@@proto@@']: 1 });
    else inner[random() < 0.5 ? '@@proto@@' : 'n'] = random() < 0.5 ? 1 : INFINITE;
  } else if (roll === 7) event.data = { deep: nested(20 + int(30)) };
  else if (roll === 8) params.requireConsumer = pick([true, false, 'yes', 1, null]);
  else if (roll === 9) params.expectedVersion = pick([0, 7, -1, 1.5, -0, 2 ** 53, Number.MAX_SAFE_INTEGER, INFINITE, '3', null]);
  else if (roll === 10) event[pick(['domain', 'name', 'pid', 'id', 'rid'])] = pick(['a'.repeat(64), 'a'.repeat(65), 'a ', ' a', 'a\u007f', 'a\u001f', '~', ' x']);
  else if (roll === 11) {
    // Trace context: version, case, length, all-zero ids, a tracestate alone, too long or not ASCII.
    const field = pick(['traceparent', 'tracestate']);
    event[field] = pick([
      '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      '01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      '00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01',
      '00-00000000000000000000000000000000-00f067aa0ba902b7-01',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x',
      'x'.repeat(513),
      'ü=1',
      '',
      5,
      null,
    ]);
  }
  return JSON.stringify(params).replaceAll(`"${INFINITE}"`, '1e400').replaceAll('"@@proto@@"', '"__proto__"');
}

const nested = (depth: number): unknown => (depth === 0 ? 1 : random() < 0.5 ? [nested(depth - 1)] : { a: nested(depth - 1) });

/**
 * One generated params object, as JSON.parse gives it, through zod and through the fast path: what
 * the fast path accepts zod accepts, with an equal value; a plainly valid one it accepts itself.
 */
function judge(counts: { accepted: number; refusedByZod: number }, schema: { safeParse(value: unknown): { success: boolean; data?: unknown } }, accept: (params: unknown) => unknown, params: unknown, plain: boolean): void {
  const parsed: unknown = JSON.parse(JSON.stringify(params));
  const zod = schema.safeParse(parsed);
  const fast = accept(parsed);
  if (fast !== undefined) {
    counts.accepted++;
    expect(zod.success, `fast path accepted what zod refuses: ${JSON.stringify(parsed)}`).toBe(true);
    expect(fast).toEqual(zod.data);
  } else if (!zod.success) counts.refusedByZod++;
  if (plain) expect(fast, `fast path passed a valid frame to zod: ${JSON.stringify(parsed)}`).toBeDefined();
}

describe('fast frame path', () => {
  it('accepts only publish/persist params that zod accepts, with the same value; accepts every plainly valid one', () => {
    let accepted = 0;
    let refusedByZod = 0;
    for (let i = 0; i < 20_000; i++) {
      const op = pick(['publish', 'persist'] as const);
      const valid = validWrite(op);
      const text = i % 4 === 0 ? JSON.stringify(valid) : mutate(valid);
      const params: unknown = JSON.parse(text);
      const zod = operations[op].params.safeParse(params);
      const fast = acceptWrite(params, op);
      if (fast !== undefined) {
        accepted++;
        expect(zod.success, `fast path accepted what zod refuses: ${op} ${text}`).toBe(true);
        // toEqual, not toStrictEqual: data may hold an own `constructor` key, which toStrictEqual reads as the class.
        expect(fast, text).toEqual(zod.data);
      } else if (!zod.success) refusedByZod++;
      // Unmutated params are plainly valid: zod accepts them and so must the fast path (depth ≤ 6 here).
      if (i % 4 === 0) expect(fast, `fast path passed a valid ${op} to zod: ${text}`).toBeDefined();
    }
    // Both verdicts were exercised many times.
    expect(accepted).toBeGreaterThan(5_000);
    expect(refusedByZod).toBeGreaterThan(5_000);
  });

  it('accepts only settle params that zod accepts, with the same value; accepts every plainly valid one', () => {
    const counts = { accepted: 0, refusedByZod: 0 };
    // Lone surrogates ('📦' cut in half, either half) are refused: no UTF-8 store holds them (unicode-text.ts).
    const text = (): unknown => pick(['', 'x', 'ü📦', 'a'.repeat(4096), 'a'.repeat(4097), 'a'.repeat(128), 'a'.repeat(129), 'x\ud83d', '\udce6x', `${'a'.repeat(4095)}\ud83d`, 5, null, {}, []]);
    for (let i = 0; i < 20_000; i++) {
      const valid: Record<string, unknown> = { delivery: pick(['d', 'a'.repeat(32), 'a'.repeat(64)]), outcome: pick(['success', 'failed', 'release', 'retry']) };
      // delayMs goes with retry only; beside another outcome it is a mutation (roll 6).
      if (valid.outcome === 'retry' && random() < 0.5) valid.delayMs = pick([0, 1, 86_400_000, int(1e6)]);
      if (random() < 0.3) valid.error = random() < 0.5 ? { message: 'boom' } : { message: 'boom', code: 'E_X' };
      const params: Record<string, unknown> = structuredClone(valid);
      const plain = i % 4 === 0;
      if (!plain) {
        const roll = int(8);
        if (roll === 0) params.delivery = pick(['', 'a'.repeat(65), 5, null, ['d']]);
        else if (roll === 1) params.outcome = pick(['Success', 'dead', '', 1, null]);
        else if (roll === 2) params.delayMs = pick([-1, 1.5, 86_400_001, '5', null, 2 ** 53]);
        else if (roll === 3) params.error = pick([null, 'boom', [], {}, { message: text() }, { message: 'x', code: text() }, { message: 'x', extra: 1 }, { code: 'x' }]);
        else if (roll === 4) params[pick(['extra', 'Delivery', '__proto__', 'ms'])] = 1;
        else if (roll === 5) delete params[pick(['delivery', 'outcome'])];
        else if (roll === 6) params.delayMs = pick([0, 1, 86_400_000]);
        else params.error = { message: text() };
      }
      judge(counts, operations.settle.params, acceptSettle, params, plain);
    }
    expect(counts.accepted).toBeGreaterThan(5_000);
    expect(counts.refusedByZod).toBeGreaterThan(2_000);
  });

  it('accepts only wait params that zod accepts, with the same value; accepts every plainly valid one', () => {
    const counts = { accepted: 0, refusedByZod: 0 };
    for (let i = 0; i < 20_000; i++) {
      const valid: Record<string, unknown> = {
        wait: pick(['w', 'ü📦', 'a'.repeat(64), ' ', identifier()]),
        domain: identifier(),
        pid: identifier(),
        names: Array.from({ length: pick([1, 2, 64]) }, identifier),
      };
      if (random() < 0.3) valid.afterId = identifier();
      if (random() < 0.3) valid.afterPosition = pick([0, 1, int(1e9), Number.MAX_SAFE_INTEGER]);
      if (random() < 0.5) valid.request = identifier();
      const params: Record<string, unknown> = structuredClone(valid);
      const plain = i % 4 === 0;
      if (!plain) {
        const roll = int(8);
        if (roll === 0) params.wait = pick(['', 'a'.repeat(65), 5, null, ['w']]);
        else if (roll === 1) params[pick(['domain', 'pid', 'afterId', 'request'])] = pick([...badIdentifiers, 5, null, []]);
        else if (roll === 2) params.names = pick([[], 'success', [5], [null], Array.from({ length: 65 }, () => 'n'), [pick(badIdentifiers)], ['ok', pick(badIdentifiers)], {}]);
        else if (roll === 3) params.afterPosition = pick([-1, 1.5, 2 ** 53, '5', null, 1e400]);
        else if (roll === 4) params[pick(['extra', 'Wait', '__proto__', 'timeout', 'after'])] = 1;
        else if (roll === 5) delete params[pick(['wait', 'domain', 'pid', 'names'])];
        else if (roll === 6) params.names = [...(params.names as string[]), pick(badIdentifiers)];
        else params.request = pick(['', 'a'.repeat(64), 'a'.repeat(65)]);
      }
      judge(counts, operations.wait.params, acceptWait, params, plain);
    }
    expect(counts.accepted).toBeGreaterThan(5_000);
    expect(counts.refusedByZod).toBeGreaterThan(5_000);
  });

  it('accepts only request envelopes that zod accepts, with the same value', () => {
    const generator = createGenerator(0xfa57, 4096);
    let accepted = 0;
    const frames: string[] = [];
    for (let i = 0; i < 20_000; i++) {
      const frame = generator.next();
      if (typeof frame.data === 'string') frames.push(frame.data);
    }
    const envelopes: unknown[] = [
      { type: 'request', id: 0, op: 'ping' },
      { type: 'request', id: Number.MAX_SAFE_INTEGER, op: 'x'.repeat(64), params: null },
      { type: 'request', id: 1, op: 'x'.repeat(65) },
      { type: 'request', id: -0, op: 'ping', params: [] },
      { type: 'request', id: 1.5, op: 'ping' },
      { type: 'request', id: 2 ** 53, op: 'ping' },
      { type: 'request', id: '1', op: 'ping' },
      { type: 'request', op: 'ping' },
      { type: 'request', id: 1 },
      { type: 'request', id: 1, op: 5 },
      { type: 'request', id: 1, op: 'ping', extra: 1 },
      { type: 'hello', protocol: 1 },
      { type: 'Request', id: 1, op: 'ping' },
      ['request'],
      null,
      'request',
    ];
    for (const text of frames) {
      try {
        envelopes.push(JSON.parse(text));
      } catch {
        // Malformed JSON never reaches either parser.
      }
    }
    envelopes.push(JSON.parse('{"type":"request","id":1,"op":"ping","__proto__":{}}'), JSON.parse('{"type":"request","id":1e400,"op":"ping"}'));
    for (const json of envelopes) {
      const fast = acceptRequest(json);
      if (fast === undefined) continue;
      accepted++;
      const zod = requestFrame.safeParse(json);
      expect(zod.success, `fast path accepted what zod refuses: ${JSON.stringify(json)}`).toBe(true);
      const { type, ...rest } = zod.data as { type: string };
      expect(type).toBe('request');
      expect({ ...fast, params: fast.params }).toStrictEqual({ params: undefined, ...rest });
    }
    expect(accepted).toBeGreaterThan(1_000);
  });
});
