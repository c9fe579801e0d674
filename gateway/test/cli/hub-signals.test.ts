/**
 * `eventflow-gateway hub` stopped by a signal while it is still starting: its `hub` row must end
 * quit, or peers keep dialling a hub that is gone. The start is held in its last step (announcing
 * to the online peers) by a peer row whose address accepts TCP and never answers; the peer's
 * first connection is the fence: the hub's row is written, start() has not returned.
 */
import { createServer, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { MysqlStore } from '../../src/store/mysql/mysql.js';
import { MASTER } from '../hub-support.js';
import { mysqlUnavailable, useTestDatabases } from '@eventflow/test-support/mysql';
import { finished, gateway } from './support.js';

describe.skipIf(mysqlUnavailable !== undefined)('eventflow-gateway hub and signals', () => {
  const { fresh, onCleanup } = useTestDatabases();

  it.each(['SIGTERM', 'SIGINT'] as const)('%s during start stops cleanly and leaves the hub row quit', async (signal) => {
    const db = await fresh();
    const schema = new MysqlStore(db.options);
    await schema.init();
    await schema.close();

    const held: Socket[] = [];
    let dialled!: () => void;
    const peerDialled = new Promise<void>((resolve) => (dialled = resolve));
    const silentPeer = createServer((socket) => {
      held.push(socket);
      dialled();
    });
    await new Promise<void>((resolve) => silentPeer.listen(0, '127.0.0.1', resolve));
    onCleanup(async () => {
      for (const socket of held) socket.destroy();
      await new Promise((resolve) => silentPeer.close(resolve));
    });
    const peerPort = (silentPeer.address() as { port: number }).port;
    await db.query('INSERT INTO hub (id, internal_ip, internal_port, external_ip, external_port) VALUES (?, ?, ?, ?, ?)', ['SILENT-PEER.EVENTFLOW-HUB', '127.0.0.1', peerPort, '127.0.0.1', peerPort]);

    const hub = gateway(['hub'], {
      EVENTFLOW_MYSQL_HOST: db.options.host ?? '127.0.0.1',
      EVENTFLOW_MYSQL_PORT: db.options.port ?? 3306,
      EVENTFLOW_MYSQL_USER: db.options.user ?? 'root',
      EVENTFLOW_MYSQL_PASS: db.options.password ?? '',
      EVENTFLOW_MYSQL_DB: db.name,
      EVENTFLOW_HUB_INTERNAL_PORT: 0,
      // Long enough that start() is still announcing when the signal comes.
      EVENTFLOW_HUB_PEER_HUB_ONLINE_TIMEOUT: 60_000,
      EVENTFLOW_CERT_PASS_ENCRYPTION_KEY: MASTER,
      EVENTFLOW_CERT_PASS_PBKDF2_ITERATIONS: 1000,
      EVENTFLOW_LOG_LEVEL: 'warn',
    });
    await Promise.race([peerDialled, hub.exited.then((result) => Promise.reject(new Error(`the hub exited first: ${JSON.stringify(result)}`)))]);
    const own = await db.query<{ id: string; quit: string | null }>("SELECT id, quit FROM hub WHERE id <> 'SILENT-PEER.EVENTFLOW-HUB'");
    expect(own).toEqual([expect.objectContaining({ quit: null })]);
    expect(hub.stdout()).not.toContain('listening:'); // still starting

    hub.proc.kill(signal);
    const result = await finished(hub, 20_000);
    expect({ code: result.code, signal: result.signal }).toEqual({ code: 0, signal: null });
    expect(result.stdout).toContain(`${signal}: stopping hub`);
    const after = await db.query<{ quit: string | null }>('SELECT quit FROM hub WHERE id = ?', [own[0]!.id]);
    expect(after[0]?.quit).not.toBeNull();
  });
});
