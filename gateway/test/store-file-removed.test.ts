/**
 * The SQLite store's files removed while the gateway runs. The gateway still has them open, so SQLite
 * in WAL mode goes on writing to files no process can open again: with the database file (its folder
 * deleted by an operator) everything is lost when the process ends; with the WAL, every commit not
 * yet checkpointed when the process dies. Before, publishes were acknowledged and /readyz said ready.
 * Now no write is made: publishes are refused E_EVENTFLOW_STORE_FAILED (`stored: false`), a settle is
 * refused (its delivery stays open), and /readyz answers 503 with SQLite's own code for it,
 * SQLITE_READONLY_DBMOVED. Likewise with the shared-memory file (-shm) removed: the next process to
 * open the database makes a new one and no longer sees the gateway's locks, so their writes together
 * corrupted the file.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, expect, it } from 'vitest';
import { createClient, type EventflowClient } from '@eventflow/core';
import { startGateway, type Gateway } from '../src/index.js';
import { eventually } from '@eventflow/test-support/wait';
import { metric, readyz } from '@eventflow/test-support/gateway-http';
import { connect } from '@eventflow/test-support/raw-socket';

let gateway: Gateway | undefined;
let client: EventflowClient | undefined;
let dir: string | undefined;
afterEach(async () => {
  await client?.close({ drainTimeout: 100 });
  await gateway?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  client = gateway = dir = undefined;
});

/**
 * The gateway's answer to one publish, read off the wire: the client sends a refused write again until its timeout, and
 * under load a retry on the wire when it runs out made that call E_EVENTFLOW_REQUEST_TIMEOUT (CI once), not the refusal.
 */
async function refusal(on: Gateway, pid: string): Promise<{ code?: unknown; message?: unknown; details?: unknown }> {
  const raw = await connect(on.url, { client: 'store-file-removed-test' });
  try {
    return (await raw.request('publish', { event: { domain: 'gone', name: 'job', pid, data: {} } })) as { code?: unknown; message?: unknown; details?: unknown };
  } finally {
    raw.ws.terminate();
  }
}

/** The store takes no more writes: /readyz 503 saying why, and a publish refused as nothing stored, to be sent again. */
async function expectNoMoreWrites(on: Gateway): Promise<void> {
  expect(await readyz(on)).toMatchObject({ status: 503, store: { reason: 'writes fail: E_EVENTFLOW_STORE_FAILED (SQLITE_READONLY_DBMOVED)' } });
  expect(await refusal(on, 'q')).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_STORE_FAILED', details: { stored: false, retryable: true } });
}

it('a store whose file was removed while open takes no more writes: publishes and settles refused, /readyz 503', async () => {
  dir = mkdtempSync(join(tmpdir(), 'eventflow-removed-'));
  const folder = join(dir, 'data');
  gateway = await startGateway({ EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: join(folder, 'events.db'), EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_CONSOLE_DIR: 'off' });
  client = createClient(gateway.url, { onError: () => undefined });
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let runs = 0;
  await client.consume('gone', 'job', async () => void (runs += 1, await gate), { group: 'workers' });
  await client.publish({ domain: 'gone', name: 'job', pid: 'p' });
  await eventually(() => runs === 1, 5_000, 'the delivery to be open');
  expect((await fetch(`${gateway.httpUrl}readyz`)).status).toBe(200);

  rmSync(folder, { recursive: true, force: true });

  await expectNoMoreWrites(gateway);

  // The handler's settle reaches a store that must not write it: refused, nothing counted.
  release();
  await eventually(async () => (await metric(gateway!, 'eventflow_store_errors_total{operation="ledger.apply"}')) >= 1, 5_000, 'the settle to be refused');
  expect(await metric(gateway, 'eventflow_consume_outcomes_total{outcome="success"}')).toBe(0);
}, 30_000);

it('a WAL removed while open: publishes refused, /readyz 503; what was acknowledged before is in the database file after a graceful stop', async () => {
  dir = mkdtempSync(join(tmpdir(), 'eventflow-removed-'));
  const path = join(dir, 'events.db');
  gateway = await startGateway({ EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: path, EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_CONSOLE_DIR: 'off' });
  client = createClient(gateway.url, { onError: () => undefined });
  const acknowledged = [];
  for (let i = 0; i < 20; i++) acknowledged.push(await client.publish({ domain: 'gone', name: 'job', pid: `p${i}` }));

  rmSync(`${path}-wal`);

  await expectNoMoreWrites(gateway);

  await client.close();
  await gateway.close();
  client = gateway = undefined;
  const db = new Database(path, { readonly: true });
  try {
    const ids = (db.prepare(`SELECT id FROM event WHERE domain = 'gone'`).all() as Array<{ id: string }>).map((row) => row.id);
    expect(ids.sort()).toEqual(acknowledged.sort());
  } finally {
    db.close();
  }
}, 30_000);

it('a -shm removed while open: no more writes (another process opening the database would not see the gateway\'s locks); the file intact and every acknowledged event in it after a graceful stop', async () => {
  dir = mkdtempSync(join(tmpdir(), 'eventflow-removed-'));
  const path = join(dir, 'events.db');
  gateway = await startGateway({ EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: path, EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_CONSOLE_DIR: 'off' });
  client = createClient(gateway.url, { onError: () => undefined });
  const acknowledged = [];
  for (let i = 0; i < 20; i++) acknowledged.push(await client.publish({ domain: 'gone', name: 'job', pid: `p${i}` }));

  // An operator clearing "temporary files". Before: the gateway went on writing, ready; with another
  // process writing too (the next line's kind), integrity_check found pages referenced twice.
  rmSync(`${path}-shm`);

  await expectNoMoreWrites(gateway);
  const failure = await refusal(gateway, 'r');
  expect(failure.message).toMatch(/the shared-memory file \(-shm\) of .* was removed while the gateway had it open: .* nothing more is written to it; stop every other process that has the database open/);
  // Nor by the writes that check nothing first: a delete (before: deleted, in a file another process corrupted).
  await expect(client.delete(acknowledged[0]!)).rejects.toMatchObject({ code: 'E_EVENTFLOW_STORE_FAILED' });

  // Another process (its own -shm) reads and writes the database meanwhile.
  const script = `const Database = require('better-sqlite3'); const db = new Database(process.argv[1]); db.pragma('busy_timeout = 2000');
    for (let i = 0; i < 5; i++) db.prepare("INSERT OR REPLACE INTO meta (key, value) VALUES ('outside-' || ?, 'x')").run(i);
    process.stdout.write(String(db.prepare('SELECT COUNT(*) AS n FROM event').get().n)); db.close();`;
  expect(execFileSync(process.execPath, ['-e', script, path], { cwd: join(import.meta.dirname, '..') }).toString()).toBe('20');

  await client.close();
  await gateway.close();
  client = gateway = undefined;
  const db = new Database(path, { readonly: true });
  try {
    expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    const ids = (db.prepare(`SELECT id FROM event WHERE domain = 'gone'`).all() as Array<{ id: string }>).map((row) => row.id);
    expect(ids.sort()).toEqual(acknowledged.sort());
  } finally {
    db.close();
  }
}, 30_000);
