/** A hub's announcement of itself to a peer hub (§6.4 A): dial, await STX, say `online`, end. */
import tls, { type TLSSocket } from 'node:tls';
import type { CertificateManager } from '../certificates/manager.js';
import { clientTlsOptions } from '../certificates/tls.js';
import { ClientReader, encodeRecord } from '../codec.js';
import type { HubRow } from './store.js';

/** What a dial needs of its hub. */
export interface PeerDialer {
  id: string;
  certificates: CertificateManager;
  /** The address the hub advertises. */
  address: { externalIp: string; externalPort: number };
  /** PEER_HUB_ONLINE_TIMEOUT: for STX, for idleness, for the peer's close. */
  timeoutMs: number;
  /** Dials in progress, which destroy() ends. */
  outbound: Set<TLSSocket>;
}

/** Connects as a client (SNI = the peer's ID), awaits STX, sends `online(ownID, externalIp, externalPort)`, ends. */
export async function sayOnline(hub: PeerDialer, peer: HubRow): Promise<void> {
  const options = await clientTlsOptions(hub.certificates, peer.id);
  const timeout = hub.timeoutMs;
  const { externalIp, externalPort } = hub.address;
  await new Promise<void>((resolve, reject) => {
    const socket = tls.connect({ ...options, host: peer.external_ip, port: peer.external_port });
    hub.outbound.add(socket);
    const reader = new ClientReader();
    let done = false;
    const finish = (error?: Error): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (error) {
        socket.destroy();
        reject(error);
      } else resolve();
    };
    const timer = setTimeout(() => finish(new Error(`peer hub sent no STX within ${timeout} ms`)), timeout);
    // The peer forwards our own `online` back to us (and ignores it); nothing else is expected.
    socket.on('data', (chunk: Buffer) => {
      if (done) return;
      try {
        reader.push(chunk);
      } catch (error) {
        finish(error as Error);
        return;
      }
      if (!reader.ready) return;
      socket.end(encodeRecord(['online', hub.id, externalIp, externalPort]), () => finish());
      // Ending takes the peer's close; never longer than the timeout.
      setTimeout(() => socket.destroy(), timeout).unref();
    });
    socket.setTimeout(timeout, () => finish(new Error(`peer hub idle for ${timeout} ms`)));
    socket.on('error', (error) => finish(error));
    socket.on('close', () => {
      hub.outbound.delete(socket);
      finish(new Error('peer hub closed the connection before STX'));
    });
  });
}
