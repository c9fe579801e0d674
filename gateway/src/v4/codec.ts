/**
 * eventflow v4's wire framing ("ASCII delimited", tcp-record-channel, eventflow-v4.md §6.1–6.2):
 * a record is its units joined by US (0x1F) and terminated by RS (0x1E), UTF-8, no escaping.
 * The accepting side sends STX (0x02) once, alone, before anything else.
 */
import type { wireErrorCodes } from '@eventflow/core';

export const STX = 0x02;
export const RS = 0x1e;
export const US = 0x1f;

export type Unit = string | number | null | undefined;

/** Thrown for input that cannot be v4 wire data; the connection should be dropped. */
export class WireError extends Error {
  override readonly name = 'WireError';
  constructor(
    readonly code: keyof typeof wireErrorCodes,
    message: string,
  ) {
    super(message);
  }
}

/** Encodes one record. Numbers become decimal, null/undefined an empty unit (as v4's join does). */
export function encodeRecord(units: readonly Unit[]): Buffer {
  const text = units
    .map((unit) => {
      const value = unit === null || unit === undefined ? '' : String(unit);
      // v4 has no escaping: a separator inside a unit would corrupt the stream for every reader.
      if (value.includes('\u001e') || value.includes('\u001f')) throw new WireError('E_EVENTFLOW_WIRE_UNIT', 'a record unit must not contain 0x1E or 0x1F');
      return value;
    })
    .join('\u001f');
  return Buffer.from(`${text}\u001e`, 'utf8');
}

/**
 * Splits a byte stream into records. Splitting on the RS byte before decoding is safe because
 * 0x1E never occurs inside a multi-byte UTF-8 sequence. A partial record waits for more bytes, up
 * to `maxRecordBytes`: v4 has no limit, but an unbounded buffer lets a peer exhaust memory.
 */
export class RecordDecoder {
  readonly #maxRecordBytes: number;
  #pending: Buffer = Buffer.alloc(0);

  constructor(maxRecordBytes = 64 * 1024) {
    this.#maxRecordBytes = maxRecordBytes;
  }

  push(chunk: Buffer): string[][] {
    let buffer = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk]);
    const records: string[][] = [];
    let end: number;
    while ((end = buffer.indexOf(RS)) !== -1) {
      records.push(buffer.subarray(0, end).toString('utf8').split('\u001f'));
      buffer = buffer.subarray(end + 1);
    }
    if (buffer.length > this.#maxRecordBytes) {
      this.#pending = Buffer.alloc(0);
      throw new WireError('E_EVENTFLOW_WIRE_OVERSIZE', `a record exceeded ${this.#maxRecordBytes} bytes without a terminator`);
    }
    this.#pending = Buffer.from(buffer);
    return records;
  }
}

/**
 * The client side of the STX handshake, tolerant as §6.2 asks: the first byte must be STX, and
 * bytes after it in the same chunk (coalesced records) are records, not a protocol error.
 */
export class ClientReader {
  readonly #decoder: RecordDecoder;
  #ready = false;

  constructor(decoder = new RecordDecoder()) {
    this.#decoder = decoder;
  }

  get ready(): boolean {
    return this.#ready;
  }

  /** Returns the records in the chunk; `ready` turns true with the STX byte. */
  push(chunk: Buffer): string[][] {
    if (this.#ready) return this.#decoder.push(chunk);
    if (chunk.length === 0) return [];
    if (chunk[0] !== STX) throw new WireError('E_EVENTFLOW_WIRE_READY_SIGNAL', `expected STX (0x02) as the first byte, got 0x${chunk[0]?.toString(16).padStart(2, '0')}`);
    this.#ready = true;
    return chunk.length > 1 ? this.#decoder.push(chunk.subarray(1)) : [];
  }
}
