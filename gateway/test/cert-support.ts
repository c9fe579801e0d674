/**
 * Test support for the certificate modules: pools on fresh databases holding v4's `certificate`
 * table (the DDL of store/mysql/schema.ts, databases from @eventflow/test-support/mysql), an independent
 * implementation of the §7.4 envelope, and a minimal v4-style TLS hub (SNI identity, client
 * certificates, STX).
 */
import { createDecipheriv, pbkdf2Sync } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import tls from 'node:tls';
import { createPool, type Pool } from 'mysql2/promise';
import { V4_TABLES } from '../src/store/mysql/schema.js';
import { mysqlUnavailable, useTestDatabases } from '@eventflow/test-support/mysql';

export { mysqlUnavailable };

const CERTIFICATE_DDL = V4_TABLES.find(([name]) => name === 'certificate')?.[1] ?? '';

/**
 * Registers the per-test clean-up of the calling suite. `fresh()` gives a pool (timezone 'Z', as
 * v4's) on a new database with only the certificate table; `onCleanup` runs after the test.
 */
export function useCertificateDatabases(): { fresh(): Promise<Pool>; onCleanup(close: () => Promise<unknown>): void } {
  const { fresh, onCleanup } = useTestDatabases();
  return {
    onCleanup,
    async fresh() {
      const database = await fresh();
      const pool = createPool({ ...database.options, timezone: 'Z', charset: 'utf8mb4', connectionLimit: 10 });
      onCleanup(() => pool.end());
      await pool.query(CERTIFICATE_DDL);
      return pool;
    },
  };
}

/** §7.4 decryption written from the spec alone, sharing no code with v4/certificates/envelope.ts. */
export function independentOpen(masterKey: string, data: Buffer, iv: Buffer, salt: Buffer, tag: Buffer): string {
  const key = pbkdf2Sync(Buffer.from(masterKey, 'utf8'), salt, 1_000_000, 32, 'sha512');
  const decipher = createDecipheriv('aes-256-gcm', key, iv);
  decipher.setAuthTag(tag);
  return Buffer.concat([decipher.update(data), decipher.final()]).toString('utf8');
}

export interface TestHub {
  port: number;
  /** Subject UID, `authorized` and `authorizationError` of every client that completed the handshake. */
  accepted: Array<{ id: string | undefined; authorized: boolean; error?: string }>;
  clientErrors: Array<Error & { code?: string }>;
  close(): Promise<void>;
}

/** A TLS server like a v4 hub: the given options, STX (0x02) to every accepted client. */
export async function startTestHub(options: tls.TlsOptions, identify: (socket: tls.TLSSocket) => string | undefined): Promise<TestHub> {
  const accepted: TestHub['accepted'] = [];
  const clientErrors: TestHub['clientErrors'] = [];
  const sockets = new Set<tls.TLSSocket>();
  const hub = tls.createServer(options, (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    const error = socket.authorizationError as unknown as string | undefined;
    accepted.push({ id: identify(socket), authorized: socket.authorized, ...(error ? { error } : {}) });
    socket.write(Buffer.from([0x02]));
  });
  hub.on('tlsClientError', (error) => clientErrors.push(error));
  await new Promise<void>((resolve) => hub.listen(0, '127.0.0.1', resolve));
  return {
    port: (hub.address() as AddressInfo).port,
    accepted,
    clientErrors,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        hub.close(() => resolve());
      }),
  };
}

export type Attempt = { ok: true } | { ok: false; reason: string };

/** Connects and waits for STX: ok only if the hub accepted us and we accepted the hub. */
export function attemptConnection(port: number, options: tls.ConnectionOptions): Promise<Attempt> {
  return new Promise((resolve) => {
    const socket = tls.connect({ host: '127.0.0.1', port, ...options });
    const finish = (result: Attempt): void => {
      clearTimeout(timer);
      resolve(result);
      socket.destroy();
    };
    const timer = setTimeout(() => finish({ ok: false, reason: 'timeout' }), 5_000);
    socket.on('data', (chunk: Buffer) => finish(chunk[0] === 0x02 ? { ok: true } : { ok: false, reason: 'no STX' }));
    socket.on('error', (error: Error & { code?: string }) => finish({ ok: false, reason: error.code ?? error.message }));
    socket.on('close', () => finish({ ok: false, reason: 'closed' }));
  });
}
