/**
 * One gateway per SQLite file: a second gateway on a file another one holds is refused with
 * E_EVENTFLOW_STORE_LOCKED, naming the file and the holder, and never opens the store; the file is
 * free again once the holder closes, or fails to start. (A holder killed with SIGKILL: the
 * start-up failures test, with real processes.)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../src/index.js';
import { lockSqliteFile } from '../src/store/sqlite/file-lock.js';

const dir = mkdtempSync(join(tmpdir(), 'eventflow-lock-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const running: Gateway[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((gateway) => gateway.close()));
});
let files = 0;
const nextFile = (): string => join(dir, `lock-${++files}`, 'eventflow.db');
const start = async (path: string, extra: Record<string, string | number> = {}): Promise<Gateway> => {
  const gateway = await startGateway({ EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: path, EVENTFLOW_LOG_LEVEL: 'silent', ...extra });
  running.push(gateway);
  return gateway;
};

describe('a SQLite file and its gateway', () => {
  it('refuses a second gateway on the file, naming the file and the gateway and process that hold it; free again once the first closes', async () => {
    const path = nextFile();
    const first = await start(path);
    const refused = await start(path).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toMatchObject({
      code: 'E_EVENTFLOW_STORE_LOCKED',
      details: { path, holder: { pid: process.pid, gateway: first.id } },
    });
    expect((refused as Error).message).toMatch(
      new RegExp(`^the SQLite database "${path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}" is in use by gateway ${first.id.replace('.', '\\.')}, process ${process.pid}, since \\S+; stop that gateway, or set EVENTFLOW_SQLITE_PATH to another file \\(gateways that share a store need EVENTFLOW_STORE=mysql\\)$`),
    );
    await running.shift()!.close();
    const next = await start(path);
    expect(next.id).not.toBe(first.id);
  });

  it('two gateways starting at once on one file: exactly one starts', async () => {
    const path = nextFile();
    const results = await Promise.allSettled([start(path), start(path), start(path)]);
    expect(results.filter((result) => result.status === 'fulfilled')).toHaveLength(1);
    for (const result of results) if (result.status === 'rejected') expect(result.reason).toMatchObject({ code: 'E_EVENTFLOW_STORE_LOCKED' });
  });

  it('a gateway that fails to start after taking the file (its port in use) leaves it to the next one', async () => {
    const path = nextFile();
    const busy: Server = await new Promise((resolve) => {
      const server = createServer();
      server.listen(0, '127.0.0.1', () => resolve(server));
    });
    try {
      await expect(start(path, { EVENTFLOW_PORT: (busy.address() as { port: number }).port })).rejects.toMatchObject({ code: 'E_EVENTFLOW_LISTEN_FAILED' });
    } finally {
      busy.close();
    }
    await expect(start(path)).resolves.toBeDefined();
  });

  it('the lock alone: released once, and an in-memory store takes none', async () => {
    const path = nextFile().replace('/eventflow.db', '.db');
    const lock = await lockSqliteFile(path, 'G1');
    await expect(lockSqliteFile(path, 'G2')).rejects.toMatchObject({ code: 'E_EVENTFLOW_STORE_LOCKED', details: { holder: { gateway: 'G1' } } });
    lock.release();
    lock.release();
    (await lockSqliteFile(path, 'G3')).release();
    await start(':memory:');
    await start(':memory:');
  });
});
