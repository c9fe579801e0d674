/**
 * v4-compatible certificate lifecycle for one process (eventflow-v4.md §7.5): root, the NAME's
 * intermediate and the process's leaf, created lazily in the shared `certificate` table under the
 * `eventflow:certificates` lock, rotated before expiry, cached in memory.
 *
 * Differences from v4, all invisible to native components:
 * - No lock per call (§11 D23): a valid cached chain is returned at once; every
 *   `rootCheckIntervalMs` a background, lock-free read of the three active certificates (no
 *   secrets) detects rotations or revocations by others. Only a change or a near expiry takes the
 *   lock, and only a missing or expiring chain makes a caller wait for it.
 * - Coordinated rotation (§11 D20): retiring a certificate revokes it only if the active row still
 *   holds it, so a rotation happens once and everyone else adopts the new row. A stored
 *   certificate not signed by its current issuer (left behind by a root or intermediate rotation)
 *   is retired and re-issued, which is v4's in-process cascade made idempotent.
 * - Trust bundle: the active root plus still-valid roots retired by rotation (trust.ts).
 * - The database stays the source of truth under the lock; the cache only saves decryption.
 */
import type { Pool } from 'mysql2/promise';
import { EventflowError } from '@eventflow/core';
import { certificateConfigFromEnv, parseCertificateConfig, type CertificateConfig, type CertificateConfigInput } from './config.js';
import { open, seal } from './envelope.js';
import { CertificateError } from './errors.js';
import {
  ROOT_ID,
  createIntermediateCertificate,
  createLeafCertificate,
  createRootCertificate,
  isIssuedBy,
  type IssuedCertificate,
  type ProfileOptions,
} from './profiles.js';
import {
  persistCertificate,
  readActiveCertificatePems,
  readCertificate,
  readCertificateHistory,
  revokeCertificate,
  withCertificateLock,
  type CertificateRow,
} from './store.js';
import { EXPIRY_MARGIN_MS, selectTrustedRoots } from './trust.js';

/** One certificate as v4's getChain() returns it: notAfter, PEM, encrypted PKCS#8 PEM, passphrase. */
export type CertificateEntry = IssuedCertificate;

export interface CertificateChain {
  root: CertificateEntry;
  intermediate: CertificateEntry;
  leaf: CertificateEntry;
}

/** A consistent snapshot for building TLS contexts; `generation` changes whenever anything in it does. */
export interface TlsMaterial {
  chain: CertificateChain;
  /** Root PEMs to trust, the active root first. */
  trustedRoots: readonly string[];
  generation: number;
}

export interface CertificateManagerOptions {
  pool: Pool;
  /** This process's ID (`<random>.<NAME>`, §1.2): the leaf id, its subject UID and SAN. */
  id: string;
  /** The configured NAME: the intermediate id (upper-cased) and its name constraint. */
  name: string;
  /** CERT_* settings; defaults to the EVENTFLOW_CERT_* environment. */
  config?: CertificateConfigInput;
  /** How often a cached chain is compared with the database, lock-free. Default 60 s. */
  rootCheckIntervalMs?: number;
  /** Gets errors of background refreshes; the cached chain keeps being served meanwhile. */
  onError?: (error: unknown) => void;
  /** Clock, for tests. */
  now?: () => number;
}

const ID_PATTERN = /^[A-Za-z0-9.-]{1,64}$/;

function sameCerts(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((cert, index) => cert === b[index]);
}

export class CertificateManager {
  /** The leaf id: this process's ID, upper-cased as v4 generates it. */
  readonly id: string;
  readonly intermediateId: string;
  readonly config: CertificateConfig;
  readonly #pool: Pool;
  readonly #interval: number;
  readonly #onError: (error: unknown) => void;
  readonly #now: () => number;
  /** Decrypted entries by id, reused while the active row holds the same certificate. */
  readonly #decrypted = new Map<string, CertificateEntry>();
  #material: TlsMaterial | undefined;
  #checkedAt = 0;
  #generation = 0;
  #pending: Promise<TlsMaterial> | undefined;

  constructor(options: CertificateManagerOptions) {
    this.config = parseCertificateConfig(options.config ?? certificateConfigFromEnv());
    const id = options.id.toUpperCase();
    const name = options.name.toUpperCase();
    const problem = !ID_PATTERN.test(name)
      ? 'NAME must be 1–64 characters of A-Z a-z 0-9 . -'
      : !ID_PATTERN.test(id)
        ? 'the process ID must be 1–64 characters of A-Z a-z 0-9 . -'
        : !id.endsWith(`.${name}`)
          ? `the process ID ${id} must end with .${name}, or its leaf violates the intermediate's name constraints`
          : name === ROOT_ID
            ? `NAME must not be ${ROOT_ID}`
            : undefined;
    if (problem) throw new EventflowError('E_EVENTFLOW_CONFIG', `invalid certificate identity: ${problem}`);
    this.id = id;
    this.intermediateId = name;
    this.#pool = options.pool;
    this.#interval = options.rootCheckIntervalMs ?? 60_000;
    this.#onError = options.onError ?? (() => {});
    this.#now = options.now ?? Date.now;
  }

  /** `{ root, intermediate, leaf }`, each `{ validity, cert, key, pass }` (§7.5). */
  async getChain(): Promise<CertificateChain> {
    return (await this.getTlsMaterial()).chain;
  }

  /**
   * The chain plus the trust bundle. Without a chain, or with one that expires within 10 minutes,
   * this loads, creates or rotates under the lock and waits. Otherwise it answers from memory at
   * once (a TLS handshake never waits for the database) and, once per `rootCheckIntervalMs`, starts
   * a background refresh() whose result the following calls see.
   */
  getTlsMaterial(): Promise<TlsMaterial> {
    const material = this.#material;
    const now = this.#now();
    if (!material || this.#expiring(material.chain, now)) return this.refresh();
    if (now - this.#checkedAt >= this.#interval) {
      this.#checkedAt = now; // one background check per interval, even when it fails
      this.refresh().catch(this.#onError);
    }
    return Promise.resolve(material);
  }

  /**
   * Compares the cached chain with the active rows now (lock-free, no decryption) and reloads under
   * the lock if anything changed or expires soon. Concurrent callers share one run.
   */
  refresh(): Promise<TlsMaterial> {
    this.#pending ??= this.#refresh().finally(() => {
      this.#pending = undefined;
    });
    return this.#pending;
  }

  /**
   * Revokes the root, this process's intermediate or its leaf, cascading as v4 does: the root takes
   * this process's intermediate and leaf with it, the intermediate its leaf. The next getChain()
   * creates replacements. Returns whether `id` had an active row.
   */
  async revoke(id: string): Promise<boolean> {
    const order = [ROOT_ID, this.intermediateId, this.id];
    const index = order.indexOf(id);
    if (index < 0) throw new CertificateError('E_EVENTFLOW_CERTIFICATES_INVALID_ID', `cannot revoke ${id}: not the root, ${this.intermediateId} or ${this.id}`);
    return withCertificateLock(this.#pool, async () => {
      let revoked = false;
      for (const target of order.slice(index)) {
        const done = await revokeCertificate(this.#pool, target);
        if (target === id) revoked = done;
        this.#decrypted.delete(target);
      }
      this.#material = undefined;
      return revoked;
    });
  }

  #expiring(chain: CertificateChain, now: number): boolean {
    return [chain.root, chain.intermediate, chain.leaf].some((entry) => entry.validity.getTime() - now <= EXPIRY_MARGIN_MS);
  }

  async #refresh(): Promise<TlsMaterial> {
    const material = this.#material;
    const now = this.#now();
    if (material && !this.#expiring(material.chain, now)) {
      const { root, intermediate, leaf } = material.chain;
      const active = await readActiveCertificatePems(this.#pool, [ROOT_ID, this.intermediateId, this.id]);
      if (active.get(ROOT_ID) === root.cert && active.get(this.intermediateId) === intermediate.cert && active.get(this.id) === leaf.cert) {
        return this.#install(material.chain, await this.#trustedRoots(now), now);
      }
    }
    return this.#load();
  }

  #load(): Promise<TlsMaterial> {
    return withCertificateLock(this.#pool, async () => {
      const root = await this.#ensure(ROOT_ID, undefined);
      const intermediate = await this.#ensure(this.intermediateId, root);
      const leaf = await this.#ensure(this.id, intermediate);
      const now = this.#now();
      return this.#install({ root, intermediate, leaf }, await this.#trustedRoots(now), now);
    });
  }

  /**
   * The active, usable certificate of `id` (under the lock): the stored one if it is not expiring
   * and is signed by `issuer`; otherwise the stored one is retired (only if still active) and a new
   * one created. If another writer persisted first, theirs is used.
   */
  async #ensure(id: string, issuer: CertificateEntry | undefined): Promise<CertificateEntry> {
    const stored = await this.#read(id);
    if (stored) {
      const fresh = stored.validity.getTime() - this.#now() > EXPIRY_MARGIN_MS;
      if (fresh && (!issuer || isIssuedBy(stored.cert, issuer.cert))) return this.#adopt(stored);
      await revokeCertificate(this.#pool, id, stored.cert);
    }
    this.#decrypted.delete(id);
    const created = await this.#create(id, issuer);
    if (await persistCertificate(this.#pool, await this.#seal(id, created))) {
      this.#decrypted.set(id, created);
      return created;
    }
    return this.#adopt(await readCertificate(this.#pool, id));
  }

  async #read(id: string): Promise<CertificateRow | undefined> {
    try {
      return await readCertificate(this.#pool, id);
    } catch (error) {
      if (error instanceof CertificateError && error.code === 'E_EVENTFLOW_DB_CERTIFICATE_NOT_FOUND') return undefined;
      throw error;
    }
  }

  async #adopt(row: CertificateRow): Promise<CertificateEntry> {
    const cached = this.#decrypted.get(row.id);
    if (cached?.cert === row.cert) return cached;
    const [key, pass] = await Promise.all([
      open({ data: row.key, iv: row.key_iv, salt: row.key_salt, tag: row.key_tag }, this.config),
      open({ data: row.pass, iv: row.pass_iv, salt: row.pass_salt, tag: row.pass_tag }, this.config),
    ]);
    const entry = { validity: row.validity, cert: row.cert, key, pass };
    this.#decrypted.set(row.id, entry);
    return entry;
  }

  #create(id: string, issuer: CertificateEntry | undefined): Promise<IssuedCertificate> {
    const options = (days: number): ProfileOptions => ({
      algorithm: this.config.CERT_ALGORITHM,
      hash: this.config.CERT_HASH,
      days,
      now: new Date(this.#now()),
    });
    if (!issuer) return createRootCertificate(options(this.config.CERT_ROOT_DAYS));
    if (id === this.intermediateId) return createIntermediateCertificate(id, issuer, options(this.config.CERT_INTERMEDIATE_DAYS));
    return createLeafCertificate(id, issuer, options(this.config.CERT_LEAF_DAYS));
  }

  async #seal(id: string, entry: IssuedCertificate): Promise<CertificateRow> {
    const [key, pass] = await Promise.all([seal(entry.key, this.config), seal(entry.pass, this.config)]);
    return {
      id,
      validity: entry.validity,
      cert: entry.cert,
      key: key.data,
      key_iv: key.iv,
      key_salt: key.salt,
      key_tag: key.tag,
      pass: pass.data,
      pass_iv: pass.iv,
      pass_salt: pass.salt,
      pass_tag: pass.tag,
    };
  }

  async #trustedRoots(now: number): Promise<string[]> {
    return selectTrustedRoots(await readCertificateHistory(this.#pool, ROOT_ID), now);
  }

  #install(chain: CertificateChain, trustedRoots: string[], now: number): TlsMaterial {
    const previous = this.#material;
    const unchanged =
      previous &&
      previous.chain.root.cert === chain.root.cert &&
      previous.chain.intermediate.cert === chain.intermediate.cert &&
      previous.chain.leaf.cert === chain.leaf.cert &&
      sameCerts(previous.trustedRoots, trustedRoots);
    if (!unchanged) this.#material = { chain, trustedRoots, generation: ++this.#generation };
    this.#checkedAt = now;
    return this.#material!;
  }
}
