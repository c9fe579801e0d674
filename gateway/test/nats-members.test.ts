/** The gateways heard over NATS (router/nats/members.ts): what a heartbeat must be, how long it counts, and its bound. */
import { describe, expect, it } from 'vitest';
import { Members } from '../src/router/nats/members.js';
import { MEMBER_HEARTBEAT_MS } from '../src/defaults.js';

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);
const GRACE = MEMBER_HEARTBEAT_MS + 1_000;

describe('gateways heard over NATS', () => {
  it('judges nobody offline or in its first heartbeat period online; then a publisher is announced while heard within three heartbeats', () => {
    const members = new Members();
    expect(members.announced('NOT-HEARD', 0)).toBe(true);
    members.online(0);
    expect(members.announced('NOT-HEARD', GRACE - 1)).toBe(true);
    expect(members.announced('NOT-HEARD', GRACE)).toBe(false);

    expect(members.heard(bytes('G1.SPOKE'), 10_000)).toBe(true);
    expect(members.announced('G1.SPOKE', 10_000 + 3 * MEMBER_HEARTBEAT_MS)).toBe(true);
    expect(members.announced('G1.SPOKE', 10_000 + 3 * MEMBER_HEARTBEAT_MS + 1_000)).toBe(false);

    members.offline();
    expect(members.announced('NOT-HEARD', 100_000)).toBe(true);
    members.online(100_000);
    expect(members.announced('NOT-HEARD', 100_000 + GRACE)).toBe(false);
  });

  it('takes only a gateway id as a heartbeat', () => {
    const members = new Members();
    for (const payload of ['', 'has space', 'x'.repeat(65), 'é', 'a\nb', '{"id":"G1"}']) expect(members.heard(bytes(payload), 0)).toBe(false);
    expect(members.heard(new Uint8Array([0xff, 0xfe]), 0)).toBe(false);
    expect(members.heard(bytes('x'.repeat(64)), 0)).toBe(true);
  });

  it('keeps at most 1,024 ids, the ones heard longest ago going first', () => {
    const members = new Members();
    members.online(0);
    const now = GRACE;
    members.heard(bytes('KEPT'), now);
    for (let i = 0; i < 5_000; i++) {
      members.heard(bytes(`FLOOD-${i}`), now);
      // Heard again, so it stays among the newest.
      if (i % 500 === 0) members.heard(bytes('KEPT'), now);
    }
    // KEPT and the newest 1,023 of the flood.
    expect(members.announced('KEPT', now)).toBe(true);
    expect(members.announced('FLOOD-0', now)).toBe(false);
    expect(members.announced('FLOOD-4999', now)).toBe(true);
    expect(members.announced('FLOOD-3977', now)).toBe(true);
    expect(members.announced('FLOOD-3976', now)).toBe(false);
  });
});
