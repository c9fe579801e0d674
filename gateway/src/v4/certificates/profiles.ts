/**
 * The three certificate profiles of eventflow v4 (eventflow-v4.md §7.3), built in-process with
 * @peculiar/x509 and node:crypto. v4 shells out to the OpenSSL CLI with passphrases and encrypted
 * CA keys on the command line (§11 D21); here no key or passphrase ever leaves this process.
 */
// tsyringe (under @peculiar/x509) needs a Reflect metadata polyfill loaded first.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { X509Certificate, createPrivateKey, createPublicKey, generateKeyPair, randomBytes, randomInt, sign, type KeyObject } from 'node:crypto';
import type { CertificateAlgorithm, CertificateHash } from './config.js';
import { authorityKeyIdentifierValue, nameConstraintsValue } from './der.js';

export const ROOT_ID = 'EVENTFLOW-ROOT-CA';
/** userId, the only attribute of every subject (OpenSSL's `UID`). */
export const UID_OID = '0.9.2342.19200300.100.1.1';
/** v4's accidental default (§11 D25), kept: the SAN of native leaves and their intermediates' constraint. */
const LOOPBACK = '127.0.0.1';
const DAY_MS = 86_400_000;

/** A certificate as stored and returned by getChain(): PEM, encrypted PKCS#8 PEM, its passphrase, notAfter. */
export interface IssuedCertificate {
  validity: Date;
  cert: string;
  key: string;
  pass: string;
}

/** What signing needs from an issuer: its certificate and its (encrypted) key with passphrase. */
export type Issuer = Pick<IssuedCertificate, 'cert' | 'key' | 'pass'>;

export interface ProfileOptions {
  algorithm: CertificateAlgorithm;
  /** Digest for ECDSA and RSA signatures (v4's CERT_HASH); EdDSA has its own. */
  hash: CertificateHash;
  days: number;
  /** Start of validity; defaults to now. */
  now?: Date;
}

/**
 * A random passphrase as v4 makes it (§7.4): 64–127 random bytes read as Latin-1 characters, with
 * every NUL and `$` removed. Its effective bytes are the UTF-8 encoding of this string.
 */
export function generatePassphrase(): string {
  return randomBytes(randomInt(64, 128)).toString('latin1').replace(/[\0$]/g, '');
}

/** The passphrase bytes every implementation uses (UTF-8 of the string, §7.4). */
export function passphraseBytes(pass: string): Buffer {
  return Buffer.from(pass, 'utf8');
}

/** Decrypts an issuer's PKCS#8 key (any encryption Node can read, including OpenSSL 3's DES-EDE3). */
export function decryptPrivateKey(key: string, pass: string): KeyObject {
  return createPrivateKey({ key, format: 'pem', passphrase: passphraseBytes(pass) });
}

export function certificateNotAfter(pem: string): Date {
  return new x509.X509Certificate(pem).notAfter;
}

/** True if `child` names `issuer` as its issuer and carries a valid signature by the issuer's key. */
export function isIssuedBy(child: string, issuer: string): boolean {
  try {
    const childCert = new X509Certificate(child);
    const issuerCert = new X509Certificate(issuer);
    return childCert.checkIssued(issuerCert) && childCert.verify(issuerCert.publicKey);
  } catch {
    return false;
  }
}

function generateKeys(algorithm: CertificateAlgorithm): Promise<KeyObject> {
  const [family, parameter = ''] = algorithm.split(':');
  return new Promise((resolve, reject) => {
    const done = (error: Error | null, _publicKey: KeyObject, privateKey: KeyObject): void => (error ? reject(error) : resolve(privateKey));
    if (algorithm === 'EdDSA:Ed448') generateKeyPair('ed448', undefined, done);
    else if (algorithm === 'EdDSA:Ed25519') generateKeyPair('ed25519', undefined, done);
    else if (family === 'ECDSA') generateKeyPair('ec', { namedCurve: parameter }, done);
    else generateKeyPair('rsa', { modulusLength: Number(parameter) }, done);
  });
}

const CURVES: Record<string, string> = { prime256v1: 'P-256', secp384r1: 'P-384', secp521r1: 'P-521' };
const WEB_HASHES: Record<CertificateHash, string> = { sha256: 'SHA-256', sha384: 'SHA-384', sha512: 'SHA-512' };

/**
 * A stand-in CryptoKey plus a provider whose `sign` is node:crypto, so that @peculiar/x509 can
 * issue with any key Node can use. Node 20's WebCrypto has Ed448 only as `{ name: 'Ed448' }`, which
 * the library cannot map to an AlgorithmIdentifier, and v4 CA keys arrive as encrypted PEM anyway.
 * The algorithm object is what the library turns into the signature AlgorithmIdentifier; it is
 * derived from the issuer's key, which may differ from CERT_ALGORITHM (e.g. a native root).
 */
function signerFor(key: KeyObject, hash: CertificateHash): { signingKey: CryptoKey; crypto: Crypto } {
  const type = key.asymmetricKeyType;
  let algorithm: Record<string, unknown>;
  let digest: string | null = null;
  let options: KeyObject | { key: KeyObject; dsaEncoding: 'ieee-p1363' } = key;
  if (type === 'ed448') algorithm = { name: 'EdDSA', namedCurve: 'Ed448' };
  else if (type === 'ed25519') algorithm = { name: 'Ed25519' };
  else if (type === 'ec') {
    const curve = CURVES[key.asymmetricKeyDetails?.namedCurve ?? ''];
    if (!curve) throw new Error(`unsupported issuer curve ${key.asymmetricKeyDetails?.namedCurve}`);
    algorithm = { name: 'ECDSA', namedCurve: curve, hash: { name: WEB_HASHES[hash] } };
    digest = hash;
    options = { key, dsaEncoding: 'ieee-p1363' }; // WebCrypto's r||s, which the library re-encodes as DER
  } else if (type === 'rsa') {
    algorithm = { name: 'RSASSA-PKCS1-v1_5', hash: { name: WEB_HASHES[hash] } };
    digest = hash;
  } else throw new Error(`unsupported issuer key type ${type}`);
  const signingKey = { type: 'private', extractable: false, algorithm, usages: ['sign'] } as unknown as CryptoKey;
  const crypto = {
    getRandomValues: (array: Uint8Array<ArrayBuffer>) => globalThis.crypto.getRandomValues(array),
    subtle: { sign: async (_algorithm: unknown, _key: unknown, data: BufferSource) => sign(digest, bytes(data), options) },
  } as unknown as Crypto;
  return { signingKey, crypto };
}

function bytes(data: BufferSource): Buffer {
  return ArrayBuffer.isView(data) ? Buffer.from(data.buffer, data.byteOffset, data.byteLength) : Buffer.from(data);
}

/** 20 random bytes with the top bit clear (a positive INTEGER, as OpenSSL's random serials). */
function randomSerial(): string {
  const bytes = randomBytes(20);
  bytes[0] = (bytes[0]! & 0x7f) | 0x01;
  return bytes.toString('hex');
}

function uidName(id: string): x509.Name {
  return new x509.Name([{ [UID_OID]: [id] }]);
}

interface IssueParams {
  subjectId: string;
  /** The issuing certificate; absent for the self-signed root. */
  issuer?: Issuer;
  extensions: (ski: string) => x509.Extension[];
  options: ProfileOptions;
}

async function issue({ subjectId, issuer, extensions, options }: IssueParams): Promise<IssuedCertificate> {
  const privateKey = await generateKeys(options.algorithm);
  const spki = createPublicKey(privateKey).export({ type: 'spki', format: 'der' });
  const publicKey = new x509.PublicKey(spki);
  const ski = Buffer.from(await publicKey.getKeyIdentifier(globalThis.crypto)).toString('hex');
  const serial = randomSerial();
  const issuerCert = issuer ? new x509.X509Certificate(issuer.cert) : undefined;
  const signing = issuer ? decryptPrivateKey(issuer.key, issuer.pass) : privateKey;
  const { signingKey, crypto } = signerFor(signing, options.hash);
  const notBefore = new Date(Math.floor((options.now ?? new Date()).getTime() / 1000) * 1000);
  const certificate = await x509.X509CertificateGenerator.create(
    {
      serialNumber: serial,
      subject: uidName(subjectId),
      // The issuer's subject as encoded in its certificate, so name chaining is byte-exact.
      issuer: issuerCert ? issuerCert.subjectName : uidName(subjectId),
      notBefore,
      notAfter: new Date(notBefore.getTime() + options.days * DAY_MS),
      publicKey: spki,
      signingKey,
      extensions: extensions(ski),
    },
    crypto,
  );
  const pass = generatePassphrase();
  const key = privateKey.export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: passphraseBytes(pass) }) as string;
  return { validity: certificate.notAfter, cert: `${certificate.toString('pem').trimEnd()}\n`, key, pass };
}

/** AKI as OpenSSL's `keyid,issuer`: the issuer's SKI plus the issuer certificate's issuer and serial. */
function authorityKeyIdentifier(issuer: Issuer): x509.Extension {
  const issuerCert = new x509.X509Certificate(issuer.cert);
  const issuerSki = issuerCert.getExtension(x509.SubjectKeyIdentifierExtension);
  if (!issuerSki) throw new Error('the issuing certificate has no subjectKeyIdentifier');
  const value = authorityKeyIdentifierValue(issuerSki.keyId, issuerCert.issuerName.toArrayBuffer(), issuerCert.serialNumber);
  return new x509.Extension('2.5.29.35', false, new Uint8Array(value));
}

const { keyCertSign, cRLSign, digitalSignature, keyEncipherment } = x509.KeyUsageFlags;

/** Root `UID=EVENTFLOW-ROOT-CA`: self-signed, CA pathlen 1, keyCertSign + cRLSign. */
export function createRootCertificate(options: ProfileOptions): Promise<IssuedCertificate> {
  return issue({
    subjectId: ROOT_ID,
    options,
    extensions: (ski) => [
      new x509.BasicConstraintsExtension(true, 1, true),
      new x509.KeyUsagesExtension(keyCertSign | cRLSign, true),
      new x509.SubjectKeyIdentifierExtension(ski),
      new x509.AuthorityKeyIdentifierExtension(ski),
    ],
  });
}

/**
 * Intermediate `UID=<NAME upper>`, signed by the root: CA pathlen 0, and critical name constraints
 * permitting `.<name lower>` and 127.0.0.1/32, so it can only vouch for leaves of its NAME.
 */
export function createIntermediateCertificate(name: string, root: Issuer, options: ProfileOptions): Promise<IssuedCertificate> {
  return issue({
    subjectId: name.toUpperCase(),
    issuer: root,
    options,
    extensions: (ski) => [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(keyCertSign | cRLSign, true),
      new x509.SubjectKeyIdentifierExtension(ski),
      authorityKeyIdentifier(root),
      new x509.Extension(
        '2.5.29.30',
        true,
        new Uint8Array(nameConstraintsValue(`.${name.toLowerCase()}`, [{ address: LOOPBACK, mask: '255.255.255.255' }])),
      ),
    ],
  });
}

/** Leaf `UID=<id upper>`, signed by the intermediate: serverAuth + clientAuth, critical SAN `DNS:<id lower>`, IP 127.0.0.1. */
export function createLeafCertificate(id: string, intermediate: Issuer, options: ProfileOptions): Promise<IssuedCertificate> {
  return issue({
    subjectId: id.toUpperCase(),
    issuer: intermediate,
    options,
    extensions: (ski) => [
      new x509.BasicConstraintsExtension(false, undefined, false),
      new x509.KeyUsagesExtension(digitalSignature | keyEncipherment, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth], false),
      new x509.SubjectKeyIdentifierExtension(ski),
      authorityKeyIdentifier(intermediate),
      new x509.SubjectAlternativeNameExtension(
        [
          { type: 'dns', value: id.toLowerCase() },
          { type: 'ip', value: LOOPBACK },
        ],
        true,
      ),
    ],
  });
}
