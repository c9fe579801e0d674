import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/sqlite.js';
import { describeSnapshots } from './snapshot-suite.js';

let dir = '';
let files = 0;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'eventflow-snapshots-'));
});
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

describeSnapshots('sqlite', async () => {
  const store = new SqliteStore({ path: path.join(dir, `snapshots-${++files}.db`) });
  await store.init();
  return store;
}, 12);
