/**
 * A WebSocket client written over a bare TCP socket that never answers the gateway's close frame
 * (every WebSocket library answers it at once): it does the upgrade, sends masked text frames, and
 * reports the frames it receives, the close frame included, and when the gateway drops the socket.
 */
import { randomBytes } from 'node:crypto';
import { connect as tcp, type Socket } from 'node:net';

export interface SilentSocket {
  /** Text frames received, parsed. */
  readonly frames: Array<Record<string, unknown>>;
  /** Resolves with the code of the gateway's close frame. */
  readonly closeFrame: Promise<number>;
  /** Resolves when the gateway has closed the TCP connection. */
  readonly ended: Promise<void>;
  send(frame: unknown): void;
  destroy(): void;
}

export async function silentSocket(port: number): Promise<SilentSocket> {
  const socket: Socket = tcp({ host: '127.0.0.1', port });
  socket.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  const frames: Array<Record<string, unknown>> = [];
  let onCloseFrame!: (code: number) => void;
  const closeFrame = new Promise<number>((resolve) => (onCloseFrame = resolve));
  const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  let buffer = Buffer.alloc(0);
  let upgraded = false;
  let onUpgrade!: () => void;
  const upgrade = new Promise<void>((resolve) => (onUpgrade = resolve));
  socket.on('data', (chunk: Buffer) => {
    buffer = Buffer.concat([buffer, chunk]);
    if (!upgraded) {
      const end = buffer.indexOf('\r\n\r\n');
      if (end < 0) return;
      if (!buffer.subarray(0, end).toString().startsWith('HTTP/1.1 101')) throw new Error(`upgrade refused: ${buffer.toString()}`);
      buffer = buffer.subarray(end + 4);
      upgraded = true;
      onUpgrade();
    }
    // Server frames are not masked; the gateway sends no fragments.
    for (;;) {
      if (buffer.length < 2) return;
      const opcode = (buffer[0] as number) & 0x0f;
      let length = (buffer[1] as number) & 0x7f;
      let offset = 2;
      if (length === 126) {
        if (buffer.length < 4) return;
        length = buffer.readUInt16BE(2);
        offset = 4;
      } else if (length === 127) {
        if (buffer.length < 10) return;
        length = Number(buffer.readBigUInt64BE(2));
        offset = 10;
      }
      if (buffer.length < offset + length) return;
      const payload = buffer.subarray(offset, offset + length);
      buffer = buffer.subarray(offset + length);
      if (opcode === 0x1) frames.push(JSON.parse(payload.toString()) as Record<string, unknown>);
      if (opcode === 0x8) onCloseFrame(payload.length >= 2 ? payload.readUInt16BE(0) : 1005);
    }
  });
  socket.write(
    `GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
  );
  await upgrade;
  return {
    frames,
    closeFrame,
    ended,
    send(frame) {
      const payload = Buffer.from(JSON.stringify(frame));
      const mask = randomBytes(4);
      const header =
        payload.length < 126
          ? Buffer.from([0x81, 0x80 | payload.length])
          : Buffer.from([0x81, 0x80 | 126, payload.length >> 8, payload.length & 0xff]);
      const masked = Buffer.from(payload.map((byte, index) => byte ^ (mask[index % 4] as number)));
      socket.write(Buffer.concat([header, mask, masked]));
    },
    destroy: () => socket.destroy(),
  };
}
