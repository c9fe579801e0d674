import { describe, expect, it } from 'vitest';
import { matchNamespacePattern, type StoredEvent } from '@eventflow/core';
import { PatternIndex } from '../src/delivery/patterns.js';
import type { Peer } from '../src/delivery/peer.js';

/** A peer that records which of its handles each event was sent for. */
function peer(id: string): Peer & { got: Array<[string, string[]]> } {
  const got: Array<[string, string[]]> = [];
  return { id, got, sendEvent: () => undefined, sendDelivery: () => undefined, sendWaited: () => undefined, sendDeleted: () => undefined, sendMatched: (event, handles) => void got.push([event.id, [...handles].sort()]) };
}

const event = (id: string, domain: string, name = 'n', pid = 'p'): StoredEvent => ({ id, domain, name, pid, data: {}, timestamp: '', rid: null, position: 1 });

describe('PatternIndex', () => {
  it('matches as the pattern matcher does, for many patterns, and forgets removed ones', () => {
    let seed = 7;
    const random = () => ((seed = (seed * 48271) % 2147483647) / 2147483647);
    const tokens = ['a', 'b', 'c', 'd'];
    const pick = <T,>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
    const index = new PatternIndex();
    const p = peer('1');
    const patterns = new Map<string, string>();
    for (let i = 0; i < 300; i++) {
      const parts = Array.from({ length: 1 + Math.floor(random() * 3) }, () => pick([...tokens, '*']));
      if (random() < 0.3) parts.push('>');
      patterns.set(`h${i}`, parts.join('.'));
      index.add(p, `h${i}`, { pattern: parts.join('.') });
    }
    for (let i = 0; i < 100; i += 3) {
      index.remove(p, `h${i}`);
      patterns.delete(`h${i}`);
    }
    expect(index.count).toBe(patterns.size);
    for (let i = 0; i < 500; i++) {
      const domain = Array.from({ length: 1 + Math.floor(random() * 4) }, () => pick(tokens)).join('.');
      p.got.length = 0;
      index.send(event(`e${i}`, domain));
      const expected = [...patterns].filter(([, pattern]) => matchNamespacePattern(pattern, domain)).map(([handle]) => handle).sort();
      expect(p.got.length === 0 ? [] : p.got[0]?.[1], domain).toEqual(expected);
      expect(p.got.length).toBeLessThanOrEqual(1); // one frame per connection
    }
    index.removePeer(p);
    expect(index.count).toBe(0);
    expect(index.wants(event('x', 'a.b'))).toBe(false);
  });

  it('applies names AND pid after the pattern', () => {
    const index = new PatternIndex();
    const p = peer('1');
    index.add(p, 'x', { pattern: 'prod.*', names: ['placed'], pid: 'order-*' });
    for (const [domain, name, pid, wanted] of [
      ['prod.eu', 'placed', 'order-1', true],
      ['prod.eu', 'shipped', 'order-1', false],
      ['prod.eu', 'placed', 'invoice-1', false],
      ['stage.eu', 'placed', 'order-1', false],
    ] as const) {
      expect(index.wants(event('e', domain, name, pid)), `${domain} ${name} ${pid}`).toBe(wanted);
    }
  });
});
