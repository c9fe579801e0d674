/**
 * One gateway per SQLite file: a second gateway on a file another one holds is refused with
 * E_EVENTFLOW_STORE_LOCKED, naming the file and the holder, and never opens the store; the file is
 * free again once the holder closes, or fails to start. (A holder killed with SIGKILL: the
 * start-up failures test, with real processes.) A process outside that holds a write transaction on
 * the file does not stall the gateway's connections: a write that meets it is answered retryable
 * and goes through once it lets go.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createClient } from '@eventflow/core';
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

  it("a process outside holding the file's write lock: the gateway's connections are not stalled by it, and a publish meeting it is stored once it lets go", async () => {
    const path = nextFile();
    const gateway = await start(path);
    const client = createClient(gateway.url, { onError: () => undefined });
    try {
      await client.publish({ domain: 'd', name: 'n', pid: 'before' });
      // The sqlite3 shell, or a script, in a write transaction on the gateway's file.
      const outside = new Database(path);
      outside.pragma('busy_timeout = 0');
      outside.exec('BEGIN IMMEDIATE');
      const published = client.publish({ id: 'held', domain: 'd', name: 'n', pid: 'held' }, { timeout: 20_000 });
      // While the lock is held the publish is tried and answered again and again; /healthz must answer
      // between the tries. Before: each try held the event loop in SQLite's busy handler for 5 s.
      let slowest = 0;
      for (let i = 0; i < 10; i++) {
        const started = Date.now();
        expect((await fetch(`${gateway.httpUrl}healthz`)).status).toBe(200);
        slowest = Math.max(slowest, Date.now() - started);
      }
      // Not ready, saying with what; before, "no answer within 2000 ms": its check had the checkpoint
      // worker truncate the WAL first, which waited 5 s for the lock.
      await expect
        .poll(async () => ((await (await fetch(`${gateway.httpUrl}readyz`)).json()) as { checks: { store: { reason?: string } } }).checks.store.reason, { timeout: 5_000 })
        .toBe('writes fail: E_EVENTFLOW_STORE_FAILED (SQLITE_BUSY)');
      outside.exec('COMMIT');
      outside.close();
      expect(await published).toBe('held');
      expect(slowest).toBeLessThan(1_500);
      expect((await client.readEventlog('d', 'held')).map((event) => event.id)).toEqual(['held']);
    } finally {
      await client.close();
    }
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
