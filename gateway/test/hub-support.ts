/**
 * Test support for the hub: a raw v4-wire test spoke (tls.connect with a spoke certificate, STX, the
 * record codec, nothing else), and a per-test fixture with a fresh MariaDB database, hubs started on
 * free ports with fast certificate settings, and the rows a v4 spoke writes.
 */
// The certificate modules first: they install the Reflect metadata API @peculiar/x509 needs.
import { CertificateManager } from '../src/v4/certificates/manager.js';
import { clientTlsOptions } from '../src/v4/certificates/tls.js';
import { ClientReader, encodeRecord, type Unit } from '../src/v4/codec.js';
import { Hub, type HubOptions } from '../src/v4/hub/hub.js';
import { parseHubConfig, type HubEnv } from '../src/v4/hub/config.js';
import { createLogger } from '../src/log.js';
import tls from 'node:tls';
import { generateEventId, generatePid } from '@eventflow/core';
import { eventually, fence, FENCE_PID } from '@eventflow/test-support/wait';
import { createPool, type Pool } from 'mysql2/promise';
import { mysqlUnavailable, useTestDatabases, type TestDatabase } from '@eventflow/test-support/mysql';

export { mysqlUnavailable };

export const MASTER = 'encryptionKey123';

type Waiter = { predicate: (record: string[]) => boolean; resolve: (record: string[]) => void; reject: (error: Error) => void; timer: NodeJS.Timeout };

/** A spoke that speaks only the v4 wire: it sees every decrypted chunk and every record. */
export class TestSpoke {
  /** Decrypted chunks as received, the first one included (STX must come alone). */
  readonly chunks: Buffer[] = [];
  readonly records: string[][] = [];
  readonly closed: Promise<void>;
  /** The certificate UID it connected with, when known. */
  id: string | undefined;
  readonly #socket: tls.TLSSocket;
  readonly #reader = new ClientReader();
  readonly #waiters = new Set<Waiter>();
  #error: Error | undefined;

  private constructor(socket: tls.TLSSocket) {
    this.#socket = socket;
    this.closed = new Promise((resolve) => socket.once('close', () => resolve()));
    socket.on('data', (chunk: Buffer) => {
      this.chunks.push(Buffer.from(chunk));
      try {
        for (const record of this.#reader.push(chunk)) this.#received(record);
      } catch (error) {
        this.#error = error as Error;
        socket.destroy();
      }
    });
    socket.on('error', (error) => (this.#error ??= error));
    void this.closed.then(() => {
      for (const waiter of this.#waiters) waiter.reject(new Error(`spoke closed while waiting (${this.#error?.message ?? 'no error'})`));
    });
  }

  /** Connects and resolves once STX arrived; rejects if the hub drops us, or after `timeoutMs`. */
  static connect(port: number, options: tls.ConnectionOptions, timeoutMs = 5000): Promise<TestSpoke> {
    return new Promise((resolve, reject) => {
      const socket = tls.connect({ host: '127.0.0.1', port, ...options });
      const spoke = new TestSpoke(socket);
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error('no STX within the timeout'));
      }, timeoutMs);
      const check = (): void => {
        if (spoke.chunks.length === 0) return;
        clearTimeout(timer);
        socket.off('data', check);
        resolve(spoke);
      };
      socket.on('data', check);
      void spoke.closed.then(() => {
        clearTimeout(timer);
        reject(Object.assign(new Error(`closed before STX: ${spoke.error?.message ?? 'no error'}`), { cause: spoke.error }));
      });
    });
  }

  get error(): (Error & { code?: string }) | undefined {
    return this.#error;
  }

  get ready(): boolean {
    return this.#reader.ready;
  }

  send(...units: Unit[]): void {
    this.#socket.write(encodeRecord(units));
  }

  sendRaw(bytes: Buffer | string): void {
    this.#socket.write(bytes);
  }

  /** Records received so far that match. */
  matching(predicate: (record: string[]) => boolean): string[][] {
    return this.records.filter(predicate);
  }

  /** The first record, received already or later, that matches. */
  waitFor(predicate: (record: string[]) => boolean, timeoutMs = 5000): Promise<string[]> {
    const found = this.records.find(predicate);
    if (found) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        predicate,
        resolve: (record) => {
          clearTimeout(waiter.timer);
          this.#waiters.delete(waiter);
          resolve(record);
        },
        reject: (error) => {
          clearTimeout(waiter.timer);
          this.#waiters.delete(waiter);
          reject(error);
        },
        timer: setTimeout(() => waiter.reject(new Error(`no matching record within ${timeoutMs} ms; got ${JSON.stringify(this.records)}`)), timeoutMs),
      };
      this.#waiters.add(waiter);
    });
  }

  close(): Promise<void> {
    this.#socket.end();
    setTimeout(() => this.#socket.destroy(), 1000).unref();
    return this.closed;
  }

  #received(record: string[]): void {
    this.records.push(record);
    for (const waiter of [...this.#waiters]) if (waiter.predicate(record)) waiter.resolve(record);
  }
}

export const isPublishOf = (id: string) => (record: string[]) => record[0] === 'publish' && record[2] === id;

/** `eventually` for a probe whose value is judged by `accept`; the failure names the last value seen. */
export async function until<T>(probe: () => Promise<T> | T, accept: (value: T) => boolean, timeoutMs = 5000, what = 'condition'): Promise<T> {
  let last: T | undefined;
  const found = await eventually(
    async () => {
      last = await probe();
      return accept(last) ? { value: last } : undefined;
    },
    timeoutMs,
    what,
    { every: 50 },
  ).catch((error: Error) => {
    throw new Error(`${error.message}: last ${JSON.stringify(last)}`);
  });
  return found.value;
}

let markers = 0;

/**
 * A fence for hub routing: `publisher` publishes a marker (with its rows, as a v4 spoke would) to
 * (domain, name) and this resolves once it reached every spoke of `receivers`. The hub routes one
 * connection's publishes in the order received and writes to each spoke in order, so whatever it
 * routed to them before has arrived by then.
 */
export async function fenceRouting(f: HubFixture, publisher: TestSpoke, receivers: TestSpoke[], domain: string, name: string): Promise<void> {
  await fence(
    async () => {
      const marker = await f.insertPublished({ domain, name, pid: `${FENCE_PID}${++markers}` });
      publisher.send('publish', marker.domain, marker.id, marker.name, marker.pid);
      return marker.id;
    },
    (id) => receivers.every((spoke) => spoke.matching(isPublishOf(id)).length > 0),
    5_000,
    `the marker at ${receivers.length} spokes`,
  );
}

export interface HubFixture {
  db: TestDatabase;
  /** A pool (timezone 'Z') on the test database, for the spokes' certificate managers. */
  pool: Pool;
  /** The environment a hub of this test gets (free port, fast PBKDF2), plus `overrides`. */
  env(overrides?: HubEnv): HubEnv;
  /** A started hub, destroyed after the test. */
  startHub(overrides?: HubEnv, options?: Omit<HubOptions, 'config'>): Promise<Hub>;
  /** A certificate manager for a new spoke ID under `name` (the intermediate). */
  spokeIdentity(name?: string): CertificateManager;
  /** A connected test spoke (STX received), with its own identity unless one is given; closed after the test. */
  spoke(hub: Hub, identity?: CertificateManager): Promise<TestSpoke>;
  /** `count` spokes with their own identities, connected one after the other. */
  spokes(hub: Hub, count: number): Promise<TestSpoke[]>;
  /** Registers a subscribe and waits until the hub holds it. */
  subscribe(hub: Hub, spoke: TestSpoke, domain: string, name: string): Promise<void>;
  /** event + event_published rows, as a v4 spoke's publish() writes them before sending `publish`. */
  insertPublished(event: { domain: string; name: string; pid?: string; id?: string }, publisher?: string): Promise<{ id: string; pid: string; domain: string; name: string }>;
  /** event + event_published + event_scheduled rows, as v4's schedule() writes them. */
  insertScheduled(event: { domain: string; name: string; pid?: string }, dueSecondsFromNow: number): Promise<{ id: string; pid: string; domain: string; name: string }>;
  published(id: string): Promise<Record<string, string | null>>;
  logRows(agent: string): Promise<Array<{ message: string; error: string }>>;
}

const silent = createLogger(process.env.EVENTFLOW_TEST_HUB_LOG === '1' ? 'debug' : 'silent');

/** Registers the per-test clean-up; call `setup()` in each test (or a beforeEach). */
export function useHubFixture(): { setup(): Promise<HubFixture> } {
  const { fresh, onCleanup } = useTestDatabases();
  return {
    async setup(): Promise<HubFixture> {
      const db = await fresh();
      // Each identity's first use holds a connection for the server-wide certificate lock and needs
      // others for its queries: spokes are created one at a time, on a pool with room to spare.
      const pool = createPool({ ...db.options, timezone: 'Z', charset: 'utf8mb4', connectionLimit: 10 });
      onCleanup(() => pool.end());
      const env = (overrides: HubEnv = {}): HubEnv => ({
        EVENTFLOW_MYSQL_HOST: db.options.host,
        EVENTFLOW_MYSQL_PORT: db.options.port,
        EVENTFLOW_MYSQL_USER: db.options.user,
        EVENTFLOW_MYSQL_PASSWORD: db.options.password,
        EVENTFLOW_MYSQL_DATABASE: db.options.database,
        EVENTFLOW_MYSQL_CONNECTION_LIMIT: 5,
        EVENTFLOW_HUB_INTERNAL_PORT: 0,
        EVENTFLOW_HUB_PEER_HUB_ONLINE_TIMEOUT: 2000,
        EVENTFLOW_CERT_PASS_ENCRYPTION_KEY: MASTER,
        EVENTFLOW_CERT_PASS_PBKDF2_ITERATIONS: 1000,
        ...overrides,
      });
      const fixture: HubFixture = {
        db,
        pool,
        env,
        async startHub(overrides = {}, options = {}) {
          const hub = new Hub({ logger: silent, ...options, config: parseHubConfig(env(overrides)) });
          onCleanup(() => hub.destroy());
          await hub.start();
          return hub;
        },
        spokeIdentity(name = 'EVENTFLOW-SPOKE') {
          const id = `${generatePid()}.${name}`.toUpperCase();
          return new CertificateManager({ pool, id, name, config: { CERT_PASS_ENCRYPTION_KEY: MASTER, CERT_PASS_PBKDF2_ITERATIONS: 1000 } });
        },
        async spoke(hub, identity = fixture.spokeIdentity()) {
          const spoke = await TestSpoke.connect(hub.port, await clientTlsOptions(identity, hub.id));
          spoke.id = identity.id;
          onCleanup(() => spoke.close());
          return spoke;
        },
        async spokes(hub, count) {
          const spokes: TestSpoke[] = [];
          for (let i = 0; i < count; i++) spokes.push(await fixture.spoke(hub));
          return spokes;
        },
        async subscribe(hub, spoke, domain, name) {
          spoke.send('subscribe', domain, name);
          const held = (): boolean => hub.subscriptions().some((s) => s.client === spoke.id && s.domain === domain && s.name === name);
          await until(held, (ok) => ok, 5000, `subscription ${domain}/${name} of ${spoke.id}`);
        },
        async insertPublished(event, publisher = 'TEST-PUBLISHER.EVENTFLOW-SPOKE') {
          const id = event.id ?? generateEventId();
          const pid = event.pid ?? generatePid();
          await db.query('INSERT INTO event (id, domain, pid, name, data) VALUES (?, ?, ?, ?, ?)', [id, event.domain, pid, event.name, '{"n":1}']);
          await db.query('INSERT INTO event_published (event_id, publisher) VALUES (?, ?)', [id, publisher]);
          return { id, pid, domain: event.domain, name: event.name };
        },
        async insertScheduled(event, dueSecondsFromNow) {
          const row = await fixture.insertPublished(event);
          await db.query('INSERT INTO event_scheduled (event_id, scheduled) VALUES (?, UTC_TIMESTAMP() + INTERVAL ? SECOND)', [row.id, dueSecondsFromNow]);
          return row;
        },
        async published(id) {
          const [row] = await db.query<Record<string, string | null>>('SELECT * FROM event_published WHERE event_id = ?', [id]);
          if (!row) throw new Error(`no event_published row for ${id}`);
          return row;
        },
        async logRows(agent) {
          return db.query<{ message: string; error: string }>('SELECT message, error FROM log WHERE agent = ? ORDER BY timestamp', [agent]);
        },
      };
      return fixture;
    },
  };
}
