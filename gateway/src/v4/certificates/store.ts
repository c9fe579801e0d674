/**
 * v4's certificate operations on the `certificate` table (eventflow-v4.md §2.2, §3.7), on a
 * mysql2 pool. Dates are exchanged as explicit UTC strings, so the results do not depend on the
 * pool's `timezone` setting.
 */
import type { Pool, ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import { CertificateError } from './errors.js';

/** The MySQL named lock every v4 component takes around certificate creation and rotation. */
export const CERTIFICATE_LOCK = 'eventflow:certificates';
export const CERTIFICATE_LOCK_TIMEOUT_SECONDS = 30;

/** The columns persistCertificate writes; `key*`/`pass*` are the §7.4 envelope. */
export interface CertificateRow {
  id: string;
  validity: Date;
  cert: string;
  key: Buffer;
  key_iv: Buffer;
  key_salt: Buffer;
  key_tag: Buffer;
  pass: Buffer;
  pass_iv: Buffer;
  pass_salt: Buffer;
  pass_tag: Buffer;
}

/** A row of any generation, without its secrets. */
export interface CertificateHistoryRow {
  version: number;
  cert: string;
  validity: Date;
  revoked: Date | null;
}

const utc = (column: string, alias = column): string => `DATE_FORMAT(${column}, '%Y-%m-%dT%H:%i:%sZ') AS ${alias}`;

/** 'YYYY-MM-DD HH:MM:SS' in UTC; certificate times have whole seconds. */
export function toUtcDatetime(date: Date): string {
  return date.toISOString().slice(0, 19).replace('T', ' ');
}

/** Reads the active row (version 0, not revoked); throws E_EVENTFLOW_DB_CERTIFICATE_NOT_FOUND without one. */
export async function readCertificate(pool: Pool, id: string): Promise<CertificateRow> {
  let rows: RowDataPacket[];
  try {
    [rows] = await pool.query<RowDataPacket[]>(
      `SELECT id, cert, \`key\`, key_iv, key_salt, key_tag, pass, pass_iv, pass_salt, pass_tag, ${utc('validity')}
       FROM certificate WHERE id = ? AND version = 0 AND revoked IS NULL`,
      [id],
    );
  } catch (cause) {
    throw new CertificateError('E_EVENTFLOW_DB_CERTIFICATE_READ', `reading certificate ${id} failed`, { cause });
  }
  const row = rows[0];
  if (!row) throw new CertificateError('E_EVENTFLOW_DB_CERTIFICATE_NOT_FOUND', `no active certificate ${id}`);
  return { ...(row as CertificateRow), validity: new Date(row.validity as string) };
}

/** The active certificate PEMs of these ids (no secrets, no decryption); ids without an active row are absent. */
export async function readActiveCertificatePems(pool: Pool, ids: readonly string[]): Promise<Map<string, string>> {
  try {
    const [rows] = await pool.query<RowDataPacket[]>('SELECT id, cert FROM certificate WHERE id IN (?) AND version = 0 AND revoked IS NULL', [ids]);
    return new Map(rows.map((row) => [row.id as string, row.cert as string]));
  } catch (cause) {
    throw new CertificateError('E_EVENTFLOW_DB_CERTIFICATE_READ', `reading certificates ${ids.join(', ')} failed`, { cause });
  }
}

/** Every generation of an id (active and revoked), without secrets. */
export async function readCertificateHistory(pool: Pool, id: string): Promise<CertificateHistoryRow[]> {
  try {
    const [rows] = await pool.query<RowDataPacket[]>(
      `SELECT version, cert, ${utc('validity')}, ${utc('revoked')} FROM certificate WHERE id = ? ORDER BY version`,
      [id],
    );
    return rows.map((row) => ({
      version: Number(row.version),
      cert: row.cert as string,
      validity: new Date(row.validity as string),
      revoked: row.revoked === null ? null : new Date(row.revoked as string),
    }));
  } catch (cause) {
    throw new CertificateError('E_EVENTFLOW_DB_CERTIFICATE_READ', `reading certificate history of ${id} failed`, { cause });
  }
}

/** Inserts the row as version 0. A duplicate (someone else created it first) returns false. */
export async function persistCertificate(pool: Pool, row: CertificateRow): Promise<boolean> {
  try {
    await pool.query(
      `INSERT INTO certificate (version, id, cert, \`key\`, key_iv, key_salt, key_tag, pass, pass_iv, pass_salt, pass_tag, validity)
       VALUES (0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [row.id, row.cert, row.key, row.key_iv, row.key_salt, row.key_tag, row.pass, row.pass_iv, row.pass_salt, row.pass_tag, toUtcDatetime(row.validity)],
    );
    return true;
  } catch (cause) {
    if ((cause as { code?: string }).code === 'ER_DUP_ENTRY') return false;
    throw new CertificateError('E_EVENTFLOW_DB_CERTIFICATE_PERSIST', `persisting certificate ${row.id} failed`, { cause });
  }
}

/**
 * Revokes the active row: `revoked` = UTC now, `version` = the number of rows of that id (so
 * archived generations are 1, 2, 3, …). With `onlyCert`, only if the active row still holds that
 * certificate: v4 revokes whatever is active, possibly a root another process just created
 * (§11 D20); the guard makes a rotation happen once. Returns true if a row was revoked.
 */
export async function revokeCertificate(pool: Pool, id: string, onlyCert?: string): Promise<boolean> {
  try {
    // The COUNT sits in a derived table: MySQL rejects a subquery on the updated table otherwise.
    const [result] = await pool.query<ResultSetHeader>(
      `UPDATE certificate
       SET version = (SELECT n FROM (SELECT COUNT(*) AS n FROM certificate WHERE id = ?) AS generations), revoked = UTC_TIMESTAMP()
       WHERE id = ? AND version = 0 AND revoked IS NULL${onlyCert === undefined ? '' : ' AND cert = ?'}`,
      onlyCert === undefined ? [id, id] : [id, id, onlyCert],
    );
    return result.affectedRows > 0;
  } catch (cause) {
    throw new CertificateError('E_EVENTFLOW_DB_CERTIFICATE_REVOKE', `revoking certificate ${id} failed`, { cause });
  }
}

/** Revokes every active row whose validity lies in the past (UTC); returns how many. */
export async function revokeCertificatesPastValidityPeriod(pool: Pool): Promise<number> {
  try {
    const [expired] = await pool.query<RowDataPacket[]>('SELECT id FROM certificate WHERE version = 0 AND revoked IS NULL AND validity < UTC_TIMESTAMP()');
    let count = 0;
    for (const row of expired) if (await revokeCertificate(pool, row.id as string)) count += 1;
    return count;
  } catch (cause) {
    throw new CertificateError('E_EVENTFLOW_DB_CERTIFICATE_REVOKE_PAST_VALIDITY', 'revoking expired certificates failed', { cause });
  }
}

/**
 * Runs `operation` while holding GET_LOCK('eventflow:certificates') on a dedicated pooled
 * connection; releases it afterwards, destroying the connection if the release fails (a session
 * that may still hold the lock must not go back to the pool).
 */
export async function withCertificateLock<T>(pool: Pool, operation: () => Promise<T>, timeoutSeconds = CERTIFICATE_LOCK_TIMEOUT_SECONDS): Promise<T> {
  const connection = await pool.getConnection();
  let locked = false;
  try {
    const [rows] = await connection.query<RowDataPacket[]>('SELECT GET_LOCK(?, ?) AS locked', [CERTIFICATE_LOCK, timeoutSeconds]);
    const result = rows[0]?.locked as number | null | undefined;
    if (result === null || result === undefined) throw new CertificateError('E_EVENTFLOW_DB_ADVISORY_LOCK_NULL_RESULT');
    if (Number(result) !== 1) throw new CertificateError('DB_LOCK_TIMEOUT', `lock ${CERTIFICATE_LOCK} busy for ${timeoutSeconds} s`);
    locked = true;
    return await operation();
  } finally {
    if (!locked) connection.release();
    else {
      try {
        await connection.query('SELECT RELEASE_LOCK(?)', [CERTIFICATE_LOCK]);
        connection.release();
      } catch {
        connection.destroy();
      }
    }
  }
}
