/**
 * TLS options from a CertificateManager, as v4 builds them (eventflow-v4.md §7.2, Appendix A.1):
 * every side presents leaf + intermediate and trusts the root(s); the hub picks its identity only
 * through SNI. Unlike v4, the hub's SecureContext is cached and rebuilt only when the certificate
 * material changes, instead of fetching the chain under a database lock on every handshake (§11 D23).
 */
import { createSecureContext, type ConnectionOptions, type SecureContext, type SecureContextOptions, type TLSSocket, type TlsOptions } from 'node:tls';
import { CertificateError } from './errors.js';
import type { CertificateManager, TlsMaterial } from './manager.js';

/** `ca` = trusted roots, `cert` = leaf + intermediate (leaf first), `key` + `passphrase` = the leaf's. */
export function credentialOptions(material: TlsMaterial): Pick<SecureContextOptions, 'ca' | 'cert' | 'key' | 'passphrase'> {
  const { intermediate, leaf } = material.chain;
  return {
    ca: [...material.trustedRoots],
    cert: `${leaf.cert.trimEnd()}\n${intermediate.cert.trimEnd()}\n`,
    key: leaf.key,
    passphrase: leaf.pass,
  };
}

/**
 * Options for tls.connect() to a hub, as a spoke or as a hub acting as client. `servername` must be
 * the target's hub ID: Node sends no SNI for IP literals, and the hub has no certificate without
 * it. Hostname verification stays on (the hub's SAN is `DNS:<hub id lower-cased>`).
 */
export async function clientTlsOptions(manager: CertificateManager, hubId: string): Promise<ConnectionOptions> {
  return { servername: hubId, ...credentialOptions(await manager.getTlsMaterial()) };
}

export type SniCallback = (servername: string, callback: (error: Error | null, context?: SecureContext) => void) => void;

/**
 * The hub's SNICallback: accepts only SNI equal to its ID (compared lower-cased, as v4), otherwise
 * fails the handshake with E_EVENTFLOW_INVALID_HOSTNAME. Contexts are cached per material generation.
 */
export function createHubSniCallback(manager: CertificateManager): SniCallback {
  let cached: { generation: number; context: SecureContext } | undefined;
  return (servername, callback) => {
    if (servername.toLowerCase() !== manager.id.toLowerCase()) {
      callback(new CertificateError('E_EVENTFLOW_INVALID_HOSTNAME', `hostname ${servername} mismatch with hub ${manager.id}`));
      return;
    }
    manager.getTlsMaterial().then(
      (material) => {
        if (cached?.generation !== material.generation) {
          cached = { generation: material.generation, context: createSecureContext(credentialOptions(material)) };
        }
        callback(null, cached.context);
      },
      (error: Error) => callback(error),
    );
  };
}

/**
 * Options for tls.createServer() of a hub: no default certificate (a client without SNI fails the
 * handshake), SNI-selected identity, client certificates required and verified against the
 * trusted roots, including the intermediates' name constraints.
 */
export function hubServerTlsOptions(manager: CertificateManager): TlsOptions {
  return { requestCert: true, rejectUnauthorized: true, SNICallback: createHubSniCallback(manager) };
}

/** The peer's identity as v4 takes it: the subject UID of its leaf (a spoke or hub ID). */
export function peerCertificateId(socket: TLSSocket): string | undefined {
  const subject = socket.getPeerCertificate().subject as Record<string, string | string[] | undefined> | undefined;
  const uid = subject?.UID;
  return Array.isArray(uid) ? uid[0] : uid;
}
