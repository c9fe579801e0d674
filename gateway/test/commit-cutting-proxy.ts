/**
 * A TCP proxy in front of the test MySQL server that drops a COMMIT's answer and cuts its connection
 * once armed: the server has committed, the client learns nothing (the connection killed or cut at
 * that moment).
 */
import { connect, createServer, type Socket } from 'node:net';
import { server } from '@eventflow/test-support/mysql';

/**
 * A TCP proxy in front of MySQL that, once armed, lets the next COMMIT through and then cuts that connection instead
 * of answering; `arm(after)`: the next COMMIT of a connection that sent `after` (a value of the transaction's) since.
 */
export async function commitCuttingProxy(): Promise<{ port: number; arm(after?: string): void; readonly cut: number; close(): Promise<void> }> {
  const commit = Buffer.from([0x03, ...Buffer.from('COMMIT')]);
  let armed = false;
  let after: Buffer | undefined;
  let cut = 0;
  const sockets = new Set<Socket>();
  const proxy = createServer((client) => {
    const upstream = connect({ host: server.host, port: server.port });
    let cutting = false;
    let sent = false;
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => {
        sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    client.on('data', (chunk: Buffer) => {
      if (armed && after !== undefined && chunk.includes(after)) sent = true;
      if (armed && chunk.includes(commit) && (after === undefined || sent)) {
        armed = false;
        cutting = true;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (!cutting) return void client.write(chunk);
      cut += 1;
      client.destroy();
      upstream.destroy();
    });
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  return {
    port: (proxy.address() as { port: number }).port,
    arm: (marker?: string) => {
      armed = true;
      after = marker === undefined ? undefined : Buffer.from(marker);
    },
    get cut() {
      return cut;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    },
  };
}
