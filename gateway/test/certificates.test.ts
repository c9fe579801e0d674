// The certificate modules first: they install the Reflect metadata API @peculiar/x509 needs.
import { CertificateManager, type CertificateChain } from '../src/v4/certificates/manager.js';
import {
  ROOT_ID,
  createIntermediateCertificate,
  createLeafCertificate,
  createRootCertificate,
  generatePassphrase,
  isIssuedBy,
  type IssuedCertificate,
  type ProfileOptions,
} from '../src/v4/certificates/profiles.js';
import { clientTlsOptions, credentialOptions, hubServerTlsOptions, peerCertificateId } from '../src/v4/certificates/tls.js';
import { open, seal } from '../src/v4/certificates/envelope.js';
import { parseCertificateConfig, type CertificateConfigInput } from '../src/v4/certificates/config.js';
import {
  CERTIFICATE_LOCK,
  persistCertificate,
  readCertificate,
  revokeCertificate,
  revokeCertificatesPastValidityPeriod,
  withCertificateLock,
} from '../src/v4/certificates/store.js';
import { selectTrustedRoots } from '../src/v4/certificates/trust.js';
import * as x509 from '@peculiar/x509';
import { AsnConvert } from '@peculiar/asn1-schema';
import { AuthorityKeyIdentifier, NameConstraints } from '@peculiar/asn1-x509';
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import type { Pool, RowDataPacket } from 'mysql2/promise';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { attemptConnection, independentOpen, mysqlUnavailable, startTestHub, useCertificateDatabases, type TestHub } from './cert-support.js';

const MASTER = 'encryptionKey123';
const FAST: CertificateConfigInput = { CERT_PASS_ENCRYPTION_KEY: MASTER, CERT_PASS_PBKDF2_ITERATIONS: 1000 };
const HUB_ID = 'EMERALD-VORAEDRAGORN-M4IG28SA.EVENTFLOW-HUB';
const SPOKE_ID = 'FEARLESS-RADODEN-MX3ECWLB.EVENTFLOW-SPOKE';
const ED448: ProfileOptions = { algorithm: 'EdDSA:Ed448', hash: 'sha512', days: 30 };
const DAY = 86_400_000;

const databases = useCertificateDatabases();
const noDb = mysqlUnavailable !== undefined;
const describeDb = describe.skipIf(noDb);
let db: { pool: Pool };
beforeEach(async () => {
  if (!noDb) db = { pool: await databases.fresh() };
});

function manager(id: string, name: string, extra: Partial<ConstructorParameters<typeof CertificateManager>[0]> = {}): CertificateManager {
  return new CertificateManager({ pool: db.pool, id, name, config: FAST, ...extra });
}

async function rows(id: string): Promise<RowDataPacket[]> {
  const [result] = await db.pool.query<RowDataPacket[]>('SELECT version, revoked, cert FROM certificate WHERE id = ? ORDER BY version', [id]);
  return result;
}

async function hubFor(hub: CertificateManager): Promise<TestHub> {
  const started = await startTestHub(hubServerTlsOptions(hub), peerCertificateId);
  databases.onCleanup(started.close);
  return started;
}

function extension<T extends x509.Extension>(cert: x509.X509Certificate, type: new (raw: BufferSource) => T): T {
  const found = cert.getExtension(type);
  if (!found) throw new Error(`missing ${type.name}`);
  return found;
}

describe('profiles (§7.3)', () => {
  async function chain(options = ED448): Promise<IssuedCertificate[]> {
    const root = await createRootCertificate({ ...options, days: 365 });
    const intermediate = await createIntermediateCertificate('eventflow-spoke', root, { ...options, days: 30 });
    const leaf = await createLeafCertificate(SPOKE_ID.toLowerCase(), intermediate, { ...options, days: 7 });
    return [root, intermediate, leaf];
  }

  it('builds root, intermediate and leaf exactly as v4 (Ed448)', async () => {
    const [root, intermediate, leaf] = (await chain()).map((issued) => ({ issued, node: new X509Certificate(issued.cert), peculiar: new x509.X509Certificate(issued.cert) }));
    expect([root!.node.subject, intermediate!.node.subject, leaf!.node.subject]).toEqual([`UID=${ROOT_ID}`, 'UID=EVENTFLOW-SPOKE', `UID=${SPOKE_ID}`]);
    expect([root!.node.issuer, intermediate!.node.issuer, leaf!.node.issuer]).toEqual([`UID=${ROOT_ID}`, `UID=${ROOT_ID}`, 'UID=EVENTFLOW-SPOKE']);
    expect(root!.peculiar.subjectName.getField('0.9.2342.19200300.100.1.1')).toEqual([ROOT_ID]);
    expect(root!.node.publicKey.asymmetricKeyType).toBe('ed448');
    expect(root!.peculiar.signatureAlgorithm).toMatchObject({ name: 'EdDSA', namedCurve: 'Ed448' });
    expect([root!.node.ca, intermediate!.node.ca, leaf!.node.ca]).toEqual([true, true, false]);
    for (const [entry, days] of [[root!, 365], [intermediate!, 30], [leaf!, 7]] as const) {
      expect(entry.peculiar.notAfter.getTime() - entry.peculiar.notBefore.getTime()).toBe(days * DAY);
      expect(entry.issued.validity).toEqual(entry.peculiar.notAfter);
      expect(entry.issued.key).toMatch(/^-----BEGIN ENCRYPTED PRIVATE KEY-----/);
      expect(createPrivateKey({ key: entry.issued.key, passphrase: Buffer.from(entry.issued.pass, 'utf8') }).asymmetricKeyType).toBe('ed448');
      expect(entry.node.serialNumber).not.toBe(root === entry ? leaf!.node.serialNumber : root!.node.serialNumber);
    }
    expect(isIssuedBy(root!.issued.cert, root!.issued.cert) && isIssuedBy(intermediate!.issued.cert, root!.issued.cert)).toBe(true);
    expect(isIssuedBy(leaf!.issued.cert, intermediate!.issued.cert) && !isIssuedBy(leaf!.issued.cert, root!.issued.cert)).toBe(true);

    const basic = (entry: typeof root) => extension(entry!.peculiar, x509.BasicConstraintsExtension);
    expect([basic(root), basic(intermediate), basic(leaf)].map((ext) => [ext.ca, ext.pathLength, ext.critical])).toEqual([
      [true, 1, true],
      [true, 0, true],
      [false, undefined, false],
    ]);
    const { keyCertSign, cRLSign, digitalSignature, keyEncipherment } = x509.KeyUsageFlags;
    const usage = (entry: typeof root) => extension(entry!.peculiar, x509.KeyUsagesExtension);
    expect([usage(root), usage(intermediate), usage(leaf)].map((ext) => [ext.usages, ext.critical])).toEqual([
      [keyCertSign | cRLSign, true],
      [keyCertSign | cRLSign, true],
      [digitalSignature | keyEncipherment, true],
    ]);
    expect(root!.peculiar.getExtension(x509.ExtendedKeyUsageExtension)).toBeNull();
    expect(extension(leaf!.peculiar, x509.ExtendedKeyUsageExtension).usages).toEqual(['1.3.6.1.5.5.7.3.1', '1.3.6.1.5.5.7.3.2']);
    const san = extension(leaf!.peculiar, x509.SubjectAlternativeNameExtension);
    expect(san.critical).toBe(true);
    expect(san.names.toJSON()).toEqual([{ type: 'dns', value: SPOKE_ID.toLowerCase() }, { type: 'ip', value: '127.0.0.1' }]);
    expect(leaf!.node.subjectAltName).toBe(`DNS:${SPOKE_ID.toLowerCase()}, IP Address:127.0.0.1`);
    expect(root!.peculiar.getExtension(x509.SubjectAlternativeNameExtension)).toBeNull();

    const constraints = intermediate!.peculiar.getExtension('2.5.29.30')!;
    expect(constraints.critical).toBe(true);
    const parsed = AsnConvert.parse(constraints.value, NameConstraints);
    expect(parsed.excludedSubtrees).toBeUndefined();
    expect(parsed.permittedSubtrees!.map((subtree) => subtree.base.dNSName ?? subtree.base.iPAddress)).toEqual(['.eventflow-spoke', '127.0.0.1/32']);
    expect(root!.peculiar.getExtension('2.5.29.30')).toBeNull();

    const ski = (entry: typeof root) => extension(entry!.peculiar, x509.SubjectKeyIdentifierExtension).keyId;
    expect(ski(root)).toBe(Buffer.from(await root!.peculiar.publicKey.getKeyIdentifier()).toString('hex'));
    expect(extension(root!.peculiar, x509.AuthorityKeyIdentifierExtension).keyId).toBe(ski(root));
    for (const [child, issuer] of [[intermediate!, root!], [leaf!, intermediate!]] as const) {
      const aki = AsnConvert.parse(child.peculiar.getExtension('2.5.29.35')!.value, AuthorityKeyIdentifier);
      expect(Buffer.from(aki.keyIdentifier!.buffer).toString('hex')).toBe(ski(issuer));
      expect(Buffer.from(aki.authorityCertSerialNumber!).toString('hex').replace(/^00/, '')).toBe(issuer.peculiar.serialNumber);
      expect(new x509.Name(AsnConvert.serialize(aki.authorityCertIssuer![0]!.directoryName!)).toString()).toBe(issuer.peculiar.issuer);
    }
  });

  it.each(['EdDSA:Ed25519', 'ECDSA:P-256', 'ECDSA:P-521', 'RSA:2048'] as const)('also issues verifiable chains with %s', async (algorithm) => {
    const [root, intermediate, leaf] = await chain({ ...ED448, algorithm });
    expect(isIssuedBy(intermediate!.cert, root!.cert) && isIssuedBy(leaf!.cert, intermediate!.cert)).toBe(true);
    expect(new X509Certificate(leaf!.cert).checkHost(SPOKE_ID.toLowerCase())).toBe(SPOKE_ID.toLowerCase());
  });

  it('makes passphrases of 64–127 Latin-1 characters without NUL or $, used as UTF-8', async () => {
    const samples = Array.from({ length: 500 }, generatePassphrase);
    for (const pass of samples) {
      expect(pass.length).toBeLessThanOrEqual(127);
      expect(pass.length).toBeGreaterThan(40);
      expect(pass).not.toMatch(/[\0$]/);
      expect([...pass].every((char) => char.charCodeAt(0) <= 0xff)).toBe(true);
    }
    expect(Math.max(...samples.map((pass) => pass.length))).toBeGreaterThan(110);
    expect(samples.some((pass) => /[\x80-\xff]/.test(pass))).toBe(true);
    const root = await createRootCertificate(ED448);
    expect(() => createPrivateKey({ key: root.key, passphrase: Buffer.from(root.pass, 'utf8') })).not.toThrow();
    if (/[\x80-\xff]/.test(root.pass)) expect(() => createPrivateKey({ key: root.key, passphrase: Buffer.from(root.pass, 'latin1') })).toThrow();
  });
});

describe('configuration and envelope (§1.4, §7.4)', () => {
  it('requires the master key and validates values', () => {
    expect(() => parseCertificateConfig({})).toThrow(expect.objectContaining({ code: 'E_EVENTFLOW_CERTIFICATES_MISSING_CONFIGURATION' }));
    expect(() => new CertificateManager({ pool: {} as Pool, id: HUB_ID, name: 'EVENTFLOW-HUB', config: {} })).toThrow(
      expect.objectContaining({ code: 'E_EVENTFLOW_CERTIFICATES_MISSING_CONFIGURATION' }),
    );
    expect(() => parseCertificateConfig({ ...FAST, CERT_ALGORITHM: 'DSA:1024' })).toThrow(expect.objectContaining({ code: 'E_EVENTFLOW_CONFIG' }));
    expect(() => new CertificateManager({ pool: {} as Pool, id: 'HUB-1.OTHER-NAME', name: 'EVENTFLOW-HUB', config: FAST })).toThrow(expect.objectContaining({ code: 'E_EVENTFLOW_CONFIG' }));
    expect(parseCertificateConfig({ CERT_PASS_ENCRYPTION_KEY: 'k', CERT_LEAF_DAYS: '3' })).toMatchObject({
      CERT_ALGORITHM: 'EdDSA:Ed448',
      CERT_LEAF_DAYS: 3,
      CERT_PASS_PBKDF2_ITERATIONS: 1_000_000,
      CERT_PASS_PBKDF2_BYTES: 32,
      CERT_PASS_CIPHER: 'aes-256-gcm',
    });
  });

  it('round-trips, with fresh salt and IV per value, and a wrong master key fails GCM authentication', async () => {
    const config = parseCertificateConfig(FAST);
    const sealed = await seal('pässphrase\n\u00ff', config);
    expect([sealed.iv.length, sealed.salt.length, sealed.tag.length]).toEqual([16, 16, 16]);
    expect(await open(sealed, config)).toBe('pässphrase\n\u00ff');
    const again = await seal('pässphrase\n\u00ff', config);
    expect(again.salt.equals(sealed.salt) || again.iv.equals(sealed.iv)).toBe(false);
    const wrong = parseCertificateConfig({ ...FAST, CERT_PASS_ENCRYPTION_KEY: 'not-the-key' });
    await expect(open(sealed, wrong)).rejects.toMatchObject({ code: 'E_EVENTFLOW_CERTIFICATES_DECRYPT', cause: expect.any(Error) });
  });

  it.skipIf(noDb)('is v4-compatible at the default 1,000,000 iterations (decrypted by an independent implementation)', { timeout: 60_000 }, async () => {
    const defaults = manager(SPOKE_ID, 'EVENTFLOW-SPOKE', { config: { CERT_PASS_ENCRYPTION_KEY: MASTER } });
    expect(defaults.config.CERT_PASS_PBKDF2_ITERATIONS).toBe(1_000_000);
    const chain = await defaults.getChain();
    for (const [id, entry] of [[ROOT_ID, chain.root], ['EVENTFLOW-SPOKE', chain.intermediate], [SPOKE_ID, chain.leaf]] as const) {
      const row = await readCertificate(db.pool, id);
      expect(row.cert).toBe(entry.cert);
      expect(row.validity).toEqual(entry.validity);
      const key = independentOpen(MASTER, row.key, row.key_iv, row.key_salt, row.key_tag);
      const pass = independentOpen(MASTER, row.pass, row.pass_iv, row.pass_salt, row.pass_tag);
      expect([key, pass]).toEqual([entry.key, entry.pass]);
      const privateKey = createPrivateKey({ key, passphrase: Buffer.from(pass, 'utf8') });
      expect(new X509Certificate(row.cert).checkPrivateKey(privateKey)).toBe(true);
    }
  });
});

describeDb('database operations (§3.7)', () => {
  it('persists once, reads the active row, revokes with versioning and an optional guard', async () => {
    const config = parseCertificateConfig(FAST);
    const issued = await createRootCertificate(ED448);
    const [key, pass] = await Promise.all([seal(issued.key, config), seal(issued.pass, config)]);
    const row = { id: 'X', validity: issued.validity, cert: issued.cert, key: key.data, key_iv: key.iv, key_salt: key.salt, key_tag: key.tag, pass: pass.data, pass_iv: pass.iv, pass_salt: pass.salt, pass_tag: pass.tag };
    expect(await Promise.all([persistCertificate(db.pool, row), persistCertificate(db.pool, row)])).toEqual(expect.arrayContaining([true, false]));
    expect((await readCertificate(db.pool, 'X')).validity).toEqual(issued.validity);
    expect(await revokeCertificate(db.pool, 'X', 'another cert')).toBe(false);
    expect(await revokeCertificate(db.pool, 'X')).toBe(true);
    await expect(readCertificate(db.pool, 'X')).rejects.toMatchObject({ code: 'E_EVENTFLOW_DB_CERTIFICATE_NOT_FOUND' });
    expect(await persistCertificate(db.pool, row)).toBe(true);
    expect(await revokeCertificate(db.pool, 'X', issued.cert)).toBe(true);
    expect((await rows('X')).map((r) => [r.version, r.revoked instanceof Date])).toEqual([[1, true], [2, true]]);
    expect(await persistCertificate(db.pool, { ...row, id: 'OLD', validity: new Date(Date.now() - DAY) })).toBe(true);
    expect(await revokeCertificatesPastValidityPeriod(db.pool)).toBe(1);
  });

  it('holds GET_LOCK(eventflow:certificates) on its own connection and times out when busy', async () => {
    const other = await db.pool.getConnection();
    databases.onCleanup(async () => other.release());
    const [[held]] = await withCertificateLock(db.pool, () => other.query<RowDataPacket[]>('SELECT IS_USED_LOCK(?) AS owner', [CERTIFICATE_LOCK]));
    expect(held!.owner).not.toBeNull();
    await other.query('SELECT GET_LOCK(?, 0)', [CERTIFICATE_LOCK]);
    await expect(withCertificateLock(db.pool, async () => 1, 1)).rejects.toMatchObject({ code: 'DB_LOCK_TIMEOUT' });
    await other.query('SELECT RELEASE_LOCK(?)', [CERTIFICATE_LOCK]);
    expect(await withCertificateLock(db.pool, async () => 2)).toBe(2);
  });
});

describeDb('CertificateManager lifecycle (§7.5)', () => {
  it('creates the chain once when two processes race, and serves later calls from memory', async () => {
    const a = manager('A-1.EVENTFLOW-SPOKE', 'EVENTFLOW-SPOKE');
    const b = manager('B-2.EVENTFLOW-SPOKE', 'EVENTFLOW-SPOKE');
    const [chainA, chainB] = await Promise.all([a.getChain(), b.getChain()]);
    expect(chainA.root.cert).toBe(chainB.root.cert);
    expect(chainA.intermediate.cert).toBe(chainB.intermediate.cert);
    expect((await rows(ROOT_ID)).length).toBe(1);
    expect((await rows('EVENTFLOW-SPOKE')).length).toBe(1);
    expect(new X509Certificate(chainB.leaf.cert).subject).toBe('UID=B-2.EVENTFLOW-SPOKE');
    const spy = vi.spyOn(db.pool, 'getConnection');
    expect(await a.getChain()).toBe(chainA);
    expect(spy).not.toHaveBeenCalled();
    const wrongKey = manager('D-4.EVENTFLOW-SPOKE', 'EVENTFLOW-SPOKE', { config: { ...FAST, CERT_PASS_ENCRYPTION_KEY: 'not-the-key' } });
    await expect(wrongKey.getChain()).rejects.toMatchObject({ code: 'E_EVENTFLOW_CERTIFICATES_DECRYPT' });
  });

  it('rotates an expiring leaf, and an expiring intermediate with its leaf (revoke + recreate)', async () => {
    let now = Date.now();
    const spoke = manager(SPOKE_ID, 'EVENTFLOW-SPOKE', { now: () => now });
    const first = await spoke.getChain();
    now = first.leaf.validity.getTime() - 5 * 60_000;
    const second = await spoke.getChain();
    expect(second.leaf.cert).not.toBe(first.leaf.cert);
    expect([second.root.cert, second.intermediate.cert]).toEqual([first.root.cert, first.intermediate.cert]);
    expect((await rows(SPOKE_ID)).map((r) => [r.version, r.revoked === null, r.cert === first.leaf.cert])).toEqual([[0, true, false], [1, false, true]]);

    now = first.intermediate.validity.getTime() - 5 * 60_000;
    const third = await spoke.getChain();
    expect(third.root.cert).toBe(first.root.cert);
    expect(third.intermediate.cert).not.toBe(first.intermediate.cert);
    expect(isIssuedBy(third.leaf.cert, third.intermediate.cert)).toBe(true);
    expect((await rows('EVENTFLOW-SPOKE')).length).toBe(2);
    expect((await rows(SPOKE_ID)).length).toBe(3);
  });

  it('rotates the root once for everyone, re-issues stale chains and trusts the old root meanwhile', async () => {
    const hub = manager(HUB_ID, 'EVENTFLOW-HUB', { rootCheckIntervalMs: 0 });
    const spoke = manager(SPOKE_ID, 'EVENTFLOW-SPOKE', { rootCheckIntervalMs: 0 });
    const [oldHub, oldSpoke] = [await hub.getChain(), await spoke.getChain()];
    const tlsHub = await hubFor(hub);
    await db.pool.query('UPDATE certificate SET validity = UTC_TIMESTAMP() + INTERVAL 5 MINUTE WHERE id = ?', [ROOT_ID]);

    const newcomer = manager('C-3.EVENTFLOW-SPOKE', 'EVENTFLOW-SPOKE');
    const fresh = await newcomer.getChain();
    expect(fresh.root.cert).not.toBe(oldHub.root.cert);
    expect(await hub.getChain()).toBe(oldHub); // still valid: served at once, refreshed in the background
    const [newHub, newSpoke] = (await Promise.all([hub.refresh(), spoke.refresh()])).map((material) => material.chain) as [CertificateChain, CertificateChain];
    expect([newHub.root.cert, newSpoke.root.cert]).toEqual([fresh.root.cert, fresh.root.cert]);
    expect(newSpoke.intermediate.cert).toBe(fresh.intermediate.cert);
    expect(isIssuedBy(newHub.intermediate.cert, fresh.root.cert) && isIssuedBy(newHub.leaf.cert, newHub.intermediate.cert)).toBe(true);
    expect((await rows(ROOT_ID)).map((r) => [r.version, r.revoked === null])).toEqual([[0, true], [1, false]]);
    expect((await hub.getTlsMaterial()).trustedRoots).toEqual([fresh.root.cert, oldHub.root.cert]);

    // A peer still presenting the chain of the old root is accepted during the overlap, and so is a rotated one.
    const oldMaterial = { chain: oldSpoke, trustedRoots: [oldSpoke.root.cert, fresh.root.cert], generation: 0 };
    expect(await attemptConnection(tlsHub.port, { servername: HUB_ID, ...credentialOptions(oldMaterial) })).toEqual({ ok: true });
    expect(await attemptConnection(tlsHub.port, await clientTlsOptions(spoke, HUB_ID))).toEqual({ ok: true });
  });

  it('trusts retired roots only while valid and only when retired by rotation', () => {
    const now = Date.now();
    const at = (offset: number) => new Date(now + offset);
    const history = [
      { version: 0, cert: 'active', validity: at(365 * DAY), revoked: null },
      { version: 1, cert: 'rotated', validity: at(DAY), revoked: at(DAY - 8 * 60_000) },
      { version: 2, cert: 'raced', validity: at(300 * DAY), revoked: at(DAY - 6 * 60_000) },
      { version: 3, cert: 'revoked-by-operator', validity: at(200 * DAY), revoked: at(-3 * DAY) },
      { version: 4, cert: 'expired', validity: at(-DAY), revoked: at(-DAY - 60_000) },
    ];
    expect(selectTrustedRoots(history, now)).toEqual(['active', 'raced', 'rotated']);
  });

  it('revokes like v4: the root cascades to this process\'s intermediate and leaf; unknown ids are refused', async () => {
    const spoke = manager(SPOKE_ID, 'EVENTFLOW-SPOKE');
    const before = await spoke.getChain();
    await expect(spoke.revoke('SOMEONE-ELSE')).rejects.toMatchObject({ code: 'E_EVENTFLOW_CERTIFICATES_INVALID_ID' });
    expect(await spoke.revoke(ROOT_ID)).toBe(true);
    for (const id of [ROOT_ID, 'EVENTFLOW-SPOKE', SPOKE_ID]) expect((await rows(id)).map((r) => r.version)).toEqual([1]);
    const after = await spoke.getChain();
    expect(after.root.cert).not.toBe(before.root.cert);
    expect((await spoke.getTlsMaterial()).trustedRoots).toEqual([after.root.cert]);
  });
});

describeDb('mTLS between a hub and a spoke (§7.2, A.1)', () => {
  let hub: CertificateManager;
  let spoke: CertificateManager;
  let tlsHub: TestHub;
  let spokeChain: CertificateChain;
  beforeEach(async () => {
    hub = manager(HUB_ID, 'EVENTFLOW-HUB');
    spoke = manager(SPOKE_ID, 'EVENTFLOW-SPOKE');
    spokeChain = await spoke.getChain();
    tlsHub = await hubFor(hub);
  });

  it('accepts a spoke sending SNI = hub ID, identifies it by subject UID, without a lock per handshake', async () => {
    const options = await clientTlsOptions(spoke, HUB_ID);
    expect(await attemptConnection(tlsHub.port, options)).toEqual({ ok: true });
    const spy = vi.spyOn(db.pool, 'getConnection');
    for (let i = 0; i < 5; i += 1) expect(await attemptConnection(tlsHub.port, options)).toEqual({ ok: true });
    expect(await attemptConnection(tlsHub.port, { ...options, servername: HUB_ID.toLowerCase() })).toEqual({ ok: true });
    expect(spy).not.toHaveBeenCalled();
    expect(tlsHub.accepted).toHaveLength(7);
    expect(tlsHub.accepted.every((peer) => peer.id === SPOKE_ID && peer.authorized)).toBe(true);
  });

  it('aborts the handshake for a wrong SNI or no SNI', async () => {
    const options = await clientTlsOptions(spoke, HUB_ID);
    expect(await attemptConnection(tlsHub.port, { ...options, servername: 'OTHER-HUB-X.EVENTFLOW-HUB' })).toMatchObject({ ok: false });
    expect(tlsHub.clientErrors.map((error) => error.code)).toContain('E_EVENTFLOW_INVALID_HOSTNAME');
    expect(await attemptConnection(tlsHub.port, { ...options, servername: '' })).toMatchObject({ ok: false });
    expect(tlsHub.accepted).toHaveLength(0);
  });

  it('rejects a client without a certificate, with a foreign root, or with a SAN outside the name constraints', async () => {
    const trust = (await clientTlsOptions(spoke, HUB_ID)).ca;
    const present = (leaf: IssuedCertificate, intermediate: IssuedCertificate) => ({
      servername: HUB_ID,
      ca: trust,
      cert: `${leaf.cert}${intermediate.cert}`,
      key: leaf.key,
      passphrase: leaf.pass,
    });
    expect(await attemptConnection(tlsHub.port, { servername: HUB_ID, ca: trust })).toMatchObject({ ok: false });

    const foreignRoot = await createRootCertificate({ ...ED448, days: 365 });
    const foreignIntermediate = await createIntermediateCertificate('EVENTFLOW-SPOKE', foreignRoot, ED448);
    const foreignLeaf = await createLeafCertificate(SPOKE_ID, foreignIntermediate, ED448);
    expect(await attemptConnection(tlsHub.port, present(foreignLeaf, foreignIntermediate))).toMatchObject({ ok: false });

    const outside = await createLeafCertificate('INTRUDER-X.ELSEWHERE', spokeChain.intermediate, ED448);
    expect(await attemptConnection(tlsHub.port, present(outside, spokeChain.intermediate))).toMatchObject({ ok: false });
    expect(tlsHub.accepted).toHaveLength(0);

    // Why: a hub that does not reject (rejectUnauthorized: false) records OpenSSL's verdicts.
    const lenient = await startTestHub({ ...hubServerTlsOptions(hub), rejectUnauthorized: false }, peerCertificateId);
    databases.onCleanup(lenient.close);
    await attemptConnection(lenient.port, present(foreignLeaf, foreignIntermediate));
    await attemptConnection(lenient.port, present(outside, spokeChain.intermediate));
    expect(lenient.accepted.map((peer) => [peer.authorized, peer.error])).toEqual([
      [false, 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY'],
      [false, 'UNSPECIFIED'], // X509_V_ERR_PERMITTED_VIOLATION, which Node has no name for; the control below differs only in its SAN
    ]);

    // Control: a leaf inside the constraints, signed with the same intermediate (§7.6 option b), is accepted.
    const guest = await createLeafCertificate('GUEST-Y.EVENTFLOW-SPOKE', spokeChain.intermediate, ED448);
    expect(await attemptConnection(tlsHub.port, present(guest, spokeChain.intermediate))).toEqual({ ok: true });
    expect(tlsHub.accepted.map((peer) => peer.id)).toEqual(['GUEST-Y.EVENTFLOW-SPOKE']);
  });

  it('lets a hub connect as a client too, verifying the server SAN against its SNI', async () => {
    const peer = manager('PEER-HUB-Z.EVENTFLOW-HUB', 'EVENTFLOW-HUB');
    expect(await attemptConnection(tlsHub.port, await clientTlsOptions(peer, HUB_ID))).toEqual({ ok: true });
    expect(tlsHub.accepted[0]!.id).toBe('PEER-HUB-Z.EVENTFLOW-HUB');
  });
});

describe('secrets stay out of process arguments (§11 D21)', () => {
  it('the certificate modules never spawn processes', () => {
    const dir = new URL('../src/v4/certificates/', import.meta.url);
    const files = readdirSync(dir).filter((file) => file.endsWith('.ts'));
    expect(files.length).toBeGreaterThanOrEqual(5);
    for (const file of files) expect(readFileSync(new URL(file, dir), 'utf8')).not.toMatch(/child_process|\bspawn\(|\bexecFile?\(|openssl\s/);
  });
});
