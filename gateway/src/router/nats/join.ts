/**
 * The NATS router made from the configuration (EVENTFLOW_NATS_*): servers, authentication and TLS
 * passed through to nats.js, reconnecting forever.
 */
import { readFileSync } from 'node:fs';
import { EventflowError } from '@eventflow/core';
import { credsAuthenticator, type NodeConnectionOptions } from '@nats-io/transport-node';
import type { GatewayConfig } from '../../config.js';
import { NATS_CONNECT_TIMEOUT_MS, NATS_MAX_PINGS_OUT, NATS_PING_INTERVAL_MS, NATS_RECONNECT_WAIT_MS } from '../../defaults.js';
import type { Logger } from '../../log.js';
import type { EventStore } from '../../store/store.js';
import { NatsRouter } from './router.js';

/** The file's bytes; a missing or unreadable file fails the start naming its variable (not every reconnect). */
function readSetting(variable: string, path: string): Uint8Array {
  try {
    return readFileSync(path);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    throw new EventflowError('E_EVENTFLOW_CONFIG', `invalid gateway configuration: ${variable}: cannot read ${path} (${typeof code === 'string' ? code : 'error'}); point it at a readable file`);
  }
}

export function natsConnectionOptions(config: GatewayConfig, name: string): NodeConnectionOptions {
  // nats.js reads the TLS files itself, at each connect: check them once here.
  for (const variable of ['EVENTFLOW_NATS_TLS_CA_FILE', 'EVENTFLOW_NATS_TLS_CERT_FILE', 'EVENTFLOW_NATS_TLS_KEY_FILE'] as const) {
    const path = config[variable];
    if (path !== undefined) readSetting(variable, path);
  }
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
    // A silent link (no close, no bytes) is found by pings, not by TCP, which can take minutes.
    pingInterval: NATS_PING_INTERVAL_MS,
    maxPingOut: NATS_MAX_PINGS_OUT,
    timeout: NATS_CONNECT_TIMEOUT_MS,
    ...(config.EVENTFLOW_NATS_TOKEN !== undefined && { token: config.EVENTFLOW_NATS_TOKEN }),
    ...(config.EVENTFLOW_NATS_USER !== undefined && { user: config.EVENTFLOW_NATS_USER, pass: config.EVENTFLOW_NATS_PASSWORD }),
    ...(config.EVENTFLOW_NATS_CREDS_FILE !== undefined && { authenticator: credsAuthenticator(readSetting('EVENTFLOW_NATS_CREDS_FILE', config.EVENTFLOW_NATS_CREDS_FILE)) }),
    ...(tls && { tls }),
  };
}

export function joinNats(config: GatewayConfig, store: EventStore, id: string, log: Logger): NatsRouter {
  return new NatsRouter({ store, id, log, connection: natsConnectionOptions(config, id), prefix: config.EVENTFLOW_NATS_SUBJECT_PREFIX });
}
