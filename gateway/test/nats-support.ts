/** Gateways on one MariaDB test database routing over NATS (EVENTFLOW_ROUTER=nats), and what tests read from them. */
import { createClient, type EventflowClient } from '@eventflow/core';
import { startGateway, type Gateway } from '../src/index.js';
import type { NatsRouter } from '../src/router/nats/router.js';
import { eventually } from '@eventflow/test-support/wait';
import type { TestDatabase, useTestDatabases } from '@eventflow/test-support/mysql';
import { natsUrl, uniqueSubjectPrefix } from '@eventflow/test-support/nats';

type Databases = ReturnType<typeof useTestDatabases>;

export interface Cluster {
  db: TestDatabase;
  prefix: string;
  gateways: Gateway[];
  client(gateway: Gateway): EventflowClient;
}

/** A gateway on the test database `db`, routing over the NATS at `servers`. */
export function natsGatewaySettings(db: TestDatabase, servers: string, prefix: string): Record<string, string | number> {
  return {
    EVENTFLOW_PORT: 0,
    EVENTFLOW_STORE: 'mysql',
    EVENTFLOW_MYSQL_HOST: db.options.host,
    EVENTFLOW_MYSQL_PORT: db.options.port,
    EVENTFLOW_MYSQL_USER: db.options.user,
    EVENTFLOW_MYSQL_PASSWORD: db.options.password,
    EVENTFLOW_MYSQL_DATABASE: db.options.database,
    EVENTFLOW_ROUTER: 'nats',
    EVENTFLOW_NATS_SERVERS: servers,
    EVENTFLOW_NATS_SUBJECT_PREFIX: prefix,
    EVENTFLOW_LOG_LEVEL: 'silent',
  };
}

/**
 * `count` gateways on one fresh database and one subject prefix, each connected to NATS: at
 * `servers`, or at `servers[i]` for the i-th gateway when it is a list.
 */
export async function startCluster(databases: Databases, count: number, servers: string | readonly string[] = natsUrl, extra: Record<string, string | number> = {}): Promise<Cluster> {
  const db = await databases.fresh();
  const prefix = uniqueSubjectPrefix();
  const gateways: Gateway[] = [];
  for (let i = 0; i < count; i++) {
    const server = typeof servers === 'string' ? servers : (servers[i] as string);
    const gateway = await startGateway({ ...natsGatewaySettings(db, server, prefix), ...extra });
    databases.onCleanup(() => gateway.close());
    gateways.push(gateway);
  }
  for (const gateway of gateways) await eventually(() => (gateway.router as NatsRouter).connected, 10_000, 'gateway connected to NATS');
  return {
    db,
    prefix,
    gateways,
    client(gateway) {
      const client = createClient(gateway.url, { reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined });
      // Registered after the gateways: cleanups run in reverse, so clients close first.
      databases.onCleanup(() => client.close());
      return client;
    },
  };
}

export interface ReadyzAnswer {
  status: number;
  body: { status: string; checks: { router: { ready: boolean; degraded?: boolean; kind: string; reason?: string } } };
}

export async function readyz(gateway: Gateway): Promise<ReadyzAnswer> {
  const response = await fetch(`${gateway.httpUrl}readyz`);
  return { status: response.status, body: (await response.json()) as never };
}

/** A metric's value in /metrics (the first line that starts with `series `), or undefined. */
export async function metric(gateway: Gateway, series: string): Promise<number | undefined> {
  const text = await (await fetch(`${gateway.httpUrl}metrics`)).text();
  const line = text.split('\n').find((row) => row.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
}
