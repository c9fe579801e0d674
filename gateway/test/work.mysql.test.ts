/**
 * The work engine's promises (work-suite.ts) on MariaDB: two gateways on one database, notified
 * over NATS (the shared server, a subject prefix per cluster), members spread over both.
 */
import { SignJWT } from 'jose';
import { createClient, type EventflowClient } from '@eventflow/core';
import { startGateway, type Gateway } from '../src/index.js';
import type { NatsRouter } from '../src/router/nats/router.js';
import { eventually } from '@eventflow/test-support/wait';
import { mysqlGatewayEnv, mysqlUnavailable, useTestDatabases } from '@eventflow/test-support/mysql';
import { natsUnavailable, natsUrl, uniqueSubjectPrefix } from '@eventflow/test-support/nats';
import { describeWork } from './work-suite.js';

const SECRET = 'work-suite-secret-0123456789-abcdefghijklmnopqrstuvwxyz';
const databases = useTestDatabases();
const unavailable = mysqlUnavailable ?? natsUnavailable;
if (unavailable !== undefined) console.warn(`Skipping the work engine's MariaDB proofs: ${unavailable}`);

describeWork(
  'MariaDB, two gateways on NATS',
  async ({ jwt = false } = {}) => {
    const db = await databases.fresh();
    const prefix = uniqueSubjectPrefix();
    const gateways: Gateway[] = [];
    for (let i = 0; i < 2; i++) {
      const gateway = await startGateway({
        ...mysqlGatewayEnv(db.options),
        EVENTFLOW_PORT: 0,
        EVENTFLOW_ROUTER: 'nats',
        EVENTFLOW_NATS_SERVERS: natsUrl,
        EVENTFLOW_NATS_SUBJECT_PREFIX: prefix,
        EVENTFLOW_LOG_LEVEL: 'silent',
        EVENTFLOW_CONSOLE_DIR: 'off',
        ...(jwt ? { EVENTFLOW_AUTH: 'jwt', EVENTFLOW_JWT_SECRET: SECRET } : {}),
      });
      databases.onCleanup(() => gateway.close());
      gateways.push(gateway);
    }
    for (const gateway of gateways) await eventually(() => (gateway.router as NatsRouter).connected, 10_000, 'gateway connected to NATS');
    const at = (index: number): Gateway => gateways[index % gateways.length] as Gateway;
    return {
      client(index = 0, token): EventflowClient {
        const client = createClient(at(index).url, { reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined, ...(token === undefined ? {} : { token }) });
        databases.onCleanup(() => client.close());
        return client;
      },
      url: (index) => at(index).url,
      gateways: 2,
      async outcome(eventId, group = '') {
        const [row] = await db.query<{ outcome: string | null }>(`SELECT outcome FROM eventflow_delivery WHERE event_id = ? AND grp = ?`, [eventId, group]);
        return row?.outcome ?? undefined;
      },
      token: (rights) => new SignJWT({ eventflow: rights }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime('1h').sign(new TextEncoder().encode(SECRET)),
    };
  },
  unavailable,
);
