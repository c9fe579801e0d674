/**
 * The NATS router made from the configuration (EVENTFLOW_NATS_*): servers, authentication and TLS
 * passed through to nats.js, reconnecting forever.
 */
import { readFileSync } from 'node:fs';
import { credsAuthenticator, type NodeConnectionOptions } from '@nats-io/transport-node';
import type { GatewayConfig } from '../../config.js';
import { NATS_RECONNECT_WAIT_MS } from '../../defaults.js';
import type { Logger } from '../../log.js';
import type { EventStore } from '../../store/store.js';
import { NatsRouter } from './router.js';

export function natsConnectionOptions(config: GatewayConfig, name: string): NodeConnectionOptions {
  const tls =
    config.EVENTFLOW_NATS_TLS_CA_FILE !== undefined || config.EVENTFLOW_NATS_TLS_CERT_FILE !== undefined
      ? { caFile: config.EVENTFLOW_NATS_TLS_CA_FILE, certFile: config.EVENTFLOW_NATS_TLS_CERT_FILE, keyFile: config.EVENTFLOW_NATS_TLS_KEY_FILE }
      : undefined;
  return {
    servers: config.EVENTFLOW_NATS_SERVERS.split(',').map((server) => server.trim()),
    name,
    // This gateway routed its own events already.
    noEcho: true,
    maxReconnectAttempts: -1,
    reconnectTimeWait: NATS_RECONNECT_WAIT_MS,
    ...(config.EVENTFLOW_NATS_TOKEN !== undefined && { token: config.EVENTFLOW_NATS_TOKEN }),
    ...(config.EVENTFLOW_NATS_USER !== undefined && { user: config.EVENTFLOW_NATS_USER, pass: config.EVENTFLOW_NATS_PASSWORD }),
    // Read at start: a missing file fails the start, not every reconnect.
    ...(config.EVENTFLOW_NATS_CREDS_FILE !== undefined && { authenticator: credsAuthenticator(readFileSync(config.EVENTFLOW_NATS_CREDS_FILE)) }),
    ...(tls && { tls }),
  };
}

export function joinNats(config: GatewayConfig, store: EventStore, id: string, log: Logger): NatsRouter {
  return new NatsRouter({ store, id, log, connection: natsConnectionOptions(config, id), prefix: config.EVENTFLOW_NATS_SUBJECT_PREFIX });
}
