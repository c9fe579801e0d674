/** The v4 wire codec with split, coalesced and garbage input (eventflow-v4.md §6.1, §6.2, §6.9). */
import { describe, expect, it } from 'vitest';
import { ClientReader, encodeRecord, RecordDecoder, WireError } from '../src/v4/codec.js';

const publish = ['publish', 'orders', 'm4ig28sa-4fzyo82mvyr', 'order-placed', 'blue-zenrad-m4ig2abc'];

describe('encodeRecord', () => {
  it('produces v4 bytes: units joined by 0x1F, terminated by 0x1E', () => {
    expect(encodeRecord(['subscribe', 'demo', '*']).toString('hex')).toBe('7375627363726962651f64656d6f1f2a1e');
    expect(encodeRecord(['online', 'HUB-1', '127.0.0.1', 50002]).toString()).toBe('online\u001fHUB-1\u001f127.0.0.1\u001f50002\u001e');
    expect(encodeRecord(['publish', 'd', 'id', 'n', undefined]).toString()).toBe('publish\u001fd\u001fid\u001fn\u001f\u001e');
  });

  it('refuses units containing a separator', () => {
    expect(() => encodeRecord(['subscribe', 'a\u001fb', '*'])).toThrow(WireError);
    expect(() => encodeRecord(['subscribe', 'a\u001e', '*'])).toThrow(WireError);
  });
});

describe('RecordDecoder', () => {
  it('decodes a record split at every byte boundary', () => {
    const bytes = encodeRecord(publish);
    for (let cut = 1; cut < bytes.length; cut++) {
      const decoder = new RecordDecoder();
      expect(decoder.push(bytes.subarray(0, cut))).toEqual([]);
      expect(decoder.push(bytes.subarray(cut))).toEqual([publish]);
    }
  });

  it('decodes coalesced records in order, keeping a trailing partial one', () => {
    const decoder = new RecordDecoder();
    const a = encodeRecord(['subscribe', 'd', '*']);
    const b = encodeRecord(publish);
    const c = encodeRecord(['unsubscribe', 'd', '*']);
    const all = Buffer.concat([a, b, c.subarray(0, 4)]);
    expect(decoder.push(all)).toEqual([['subscribe', 'd', '*'], publish]);
    expect(decoder.push(c.subarray(4))).toEqual([['unsubscribe', 'd', '*']]);
  });

  it('keeps multi-byte UTF-8 intact across chunk boundaries', () => {
    const record = ['log', 'wait › für ✓'];
    const bytes = encodeRecord(record);
    const decoder = new RecordDecoder();
    const split = bytes.indexOf(0xe2) + 1; // inside the › sequence
    expect(decoder.push(bytes.subarray(0, split))).toEqual([]);
    expect(decoder.push(bytes.subarray(split))).toEqual([record]);
  });

  it('bounds a record that never terminates, then recovers', () => {
    const decoder = new RecordDecoder(1024);
    expect(() => decoder.push(Buffer.alloc(2048, 0x41))).toThrow(expect.objectContaining({ code: 'E_EVENTFLOW_WIRE_OVERSIZE' }));
    expect(decoder.push(encodeRecord(['subscribe', 'd', 'n']))).toEqual([['subscribe', 'd', 'n']]);
  });

  it('survives random garbage: never throws anything but WireError', () => {
    let seed = 42;
    const random = (): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const decoder = new RecordDecoder(4096);
    for (let i = 0; i < 2_000; i++) {
      const chunk = Buffer.from(Array.from({ length: 1 + Math.floor(random() * 300) }, () => Math.floor(random() * 256)));
      try {
        for (const record of decoder.push(chunk)) expect(Array.isArray(record)).toBe(true);
      } catch (error) {
        expect(error).toBeInstanceOf(WireError);
      }
    }
  });
});

describe('ClientReader (STX handshake, tolerant client)', () => {
  it('becomes ready on a lone STX', () => {
    const reader = new ClientReader();
    expect(reader.push(Buffer.from([0x02]))).toEqual([]);
    expect(reader.ready).toBe(true);
    expect(reader.push(encodeRecord(publish))).toEqual([publish]);
  });

  it('accepts STX coalesced with records (v4 §11 item 17)', () => {
    const reader = new ClientReader();
    const online = ['online', 'HUB-2', '127.0.0.1', '50002'];
    expect(reader.push(Buffer.concat([Buffer.from([0x02]), encodeRecord(online), encodeRecord(publish).subarray(0, 5)]))).toEqual([online]);
    expect(reader.push(encodeRecord(publish).subarray(5))).toEqual([publish]);
  });

  it('refuses a first byte other than STX', () => {
    expect(() => new ClientReader().push(encodeRecord(publish))).toThrow(expect.objectContaining({ code: 'E_EVENTFLOW_WIRE_READY_SIGNAL' }));
  });
});
