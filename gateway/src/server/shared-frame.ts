/**
 * A text frame framed once for every connection it goes to. A fan-out hands the same encoded event
 * string (connection/encode.ts) to every subscribed connection in a row; `ws.send(string)` would
 * convert it to bytes and frame it again per socket, which was most of a delivery's cost. Here the
 * bytes and the WebSocket header (RFC 6455 §5.2: FIN + text opcode, unmasked as a server sends it,
 * no extension bits) are built once per distinct string and the same Buffer is written to each socket.
 * Module-wide on purpose, like encode.ts: the cache is shared by every connection of the process.
 */
const framed = new Map<string, Buffer>();
/** A fan-out of one event yields at most three frames (its name, `*`, both); a few more cover interleaved pages. */
const KEEP = 8;

export function sharedTextFrame(text: string): Buffer {
  let frame = framed.get(text);
  if (frame !== undefined) return frame;
  const length = Buffer.byteLength(text);
  const header = length < 126 ? 2 : length < 65_536 ? 4 : 10;
  frame = Buffer.allocUnsafe(header + length);
  frame[0] = 0x81;
  if (header === 2) frame[1] = length;
  else if (header === 4) {
    frame[1] = 126;
    frame.writeUInt16BE(length, 2);
  } else {
    frame[1] = 127;
    frame.writeUInt32BE(0, 2);
    frame.writeUInt32BE(length, 6);
  }
  frame.write(text, header, 'utf8');
  if (framed.size >= KEEP) framed.clear();
  framed.set(text, frame);
  return frame;
}
