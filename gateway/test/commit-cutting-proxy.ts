/**
 * TCP proxies in front of the test MySQL server that cut a connection at a chosen packet, as an
 * operator's KILL or a broken link does at that moment: before the server sees a statement
 * (statementCuttingProxy), or after the server committed, instead of the COMMIT's answer
 * (commitCuttingProxy: the client learns nothing of a commit that happened).
 */
import { connect, createServer, type Socket } from 'node:net';
import { server } from '@eventflow/test-support/mysql';

export interface CuttingProxy {
  port: number;
  /** Connections cut so far. */
  readonly cut: number;
  close(): Promise<void>;
}

/** What to do with a packet the client sends: pass it, cut the connection before the server sees it, or pass it and cut instead of its answer. */
type Verdict = 'pass' | 'cut' | 'cut-answer';

/** The proxy; `watch` sees each chunk a client sends, with a state object of that connection's own. */
function cuttingProxy(watch: (chunk: Buffer, connection: { sent?: boolean }) => Verdict, target: { host: string; port: number }): Promise<CuttingProxy> {
  let cut = 0;
  const sockets = new Set<Socket>();
  const proxy = createServer((client) => {
    const upstream = connect({ host: target.host, port: target.port });
    const connection = {};
    let cutting = false;
    const cutBoth = (): void => {
      cut += 1;
      client.destroy();
      upstream.destroy();
    };
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
      const verdict = watch(chunk, connection);
      if (verdict === 'cut') return cutBoth();
      if (verdict === 'cut-answer') cutting = true;
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => (cutting ? cutBoth() : void client.write(chunk)));
  });
  return new Promise((resolve) =>
    proxy.listen(0, '127.0.0.1', () =>
      resolve({
        port: (proxy.address() as { port: number }).port,
        get cut() {
          return cut;
        },
        async close() {
          for (const socket of sockets) socket.destroy();
          await new Promise<void>((closed) => proxy.close(() => closed()));
        },
      }),
    ),
  );
}

/**
 * Once armed, lets a COMMIT through and cuts its connection instead of answering. `arm({ after })`: the
 * next COMMIT of a connection that sent `after` (a value of the transaction's) since; `arm({ skip })`:
 * the COMMIT after `skip` others. `arm({ call })`: the next prepared statement executed (COM_STMT_EXECUTE)
 * that holds `call`, a statement that commits: on MariaDB, an append's routine (store/mysql/append-routine.ts),
 * which carries the batch's rows and ends with its COMMIT.
 */
export async function commitCuttingProxy(target: { host: string; port: number } = server): Promise<CuttingProxy & { arm(options?: { after?: string; skip?: number; call?: string }): void }> {
  const commit = Buffer.from([0x03, ...Buffer.from('COMMIT')]);
  let armed = false;
  let after: Buffer | undefined;
  let call: Buffer | undefined;
  let skipping = 0;
  const proxy = await cuttingProxy((chunk, connection) => {
    if (!armed) return 'pass';
    if (call !== undefined) {
      if (chunk[4] !== 0x17 || !chunk.includes(call)) return 'pass';
      armed = false;
      return 'cut-answer';
    }
    if (after !== undefined && chunk.includes(after)) connection.sent = true;
    if (!chunk.includes(commit) || (after !== undefined && !connection.sent) || skipping-- > 0) return 'pass';
    armed = false;
    return 'cut-answer';
  }, target);
  return Object.assign(proxy, {
    arm({ after: marker, skip = 0, call: carrying }: { after?: string; skip?: number; call?: string } = {}) {
      armed = true;
      after = marker === undefined ? undefined : Buffer.from(marker);
      call = carrying === undefined ? undefined : Buffer.from(carrying);
      skipping = skip;
    },
  });
}

/** Once armed (`times` connections), cuts the connection that executes a prepared statement (COM_STMT_EXECUTE) holding `marker`, before the server sees it. */
export async function statementCuttingProxy(marker: Buffer): Promise<CuttingProxy & { arm(times?: number): void }> {
  let armed = 0;
  const proxy = await cuttingProxy((chunk) => {
    if (armed <= 0 || chunk[4] !== 0x17 || !chunk.includes(marker)) return 'pass';
    armed -= 1;
    return 'cut';
  }, server);
  return Object.assign(proxy, { arm: (times = 1) => void (armed = times) });
}
