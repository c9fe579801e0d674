/**
 * request() in a v4 hub mesh whose worker is a v4 spoke (real MariaDB, our hub, real mTLS, a v4-wire spoke):
 * a v4 spoke's consumers are no consumer group in the store (v4 has none), so the gateway cannot tell that
 * one takes the job; it must not refuse the request as if nobody did.
 */
import { describe, expect, it } from 'vitest';
import { createClient } from '@eventflow/core';
import { startGateway } from '../src/index.js';
import { HubRouter } from '../src/v4/mesh-router.js';
import { eventually } from '@eventflow/test-support/wait';
import { mysqlUnavailable, useHubFixture } from './hub-support.js';

const fixture = useHubFixture();

describe.skipIf(mysqlUnavailable !== undefined)('request() in a v4 hub mesh', () => {
  it("a request whose worker is a v4 spoke is published and answered by the spoke's outcome (no E_EVENTFLOW_NO_CONSUMER)", async () => {
    const f = await fixture.setup();
    const hub = await f.startHub();
    const gateway = await startGateway({ ...f.env(), EVENTFLOW_PORT: 0, EVENTFLOW_STORE: 'mysql', EVENTFLOW_ROUTER: 'hubs', EVENTFLOW_MESH_POLL_MS: 200, EVENTFLOW_LOG_LEVEL: 'silent' });
    const client = createClient(gateway.url, { reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined });
    try {
      await eventually(() => (gateway.router as HubRouter).connected.includes(hub.id), 10_000, 'the gateway connected to the hub');
      // The worker: a v4 spoke consuming jobs/run, which claims each job and publishes `success` with its pid.
      const worker = await f.spoke(hub);
      await f.subscribe(hub, worker, 'jobs', 'run');
      const answering = (async () => {
        const [, domain, id, , pid] = await worker.waitFor((record) => record[0] === 'publish' && record[1] === 'jobs' && record[3] === 'run', 15_000);
        await f.db.query('UPDATE event_published SET consumed_spoke = UTC_TIMESTAMP(), consumer = ? WHERE event_id = ? AND consumed_spoke IS NULL', [worker.id, id]);
        const outcome = await f.insertPublished({ domain: domain!, name: 'success', pid: pid! });
        worker.send('publish', outcome.domain, outcome.id, outcome.name, outcome.pid);
        await f.db.query('UPDATE event_published SET success = UTC_TIMESTAMP() WHERE event_id = ?', [id]);
        return outcome.id;
      })();
      answering.catch(() => undefined);

      const answer = await client.request({ domain: 'jobs', name: 'run', pid: 'job-1', data: { n: 1 } }, { timeout: 15_000 });
      expect(answer).toMatchObject({ domain: 'jobs', name: 'success', pid: 'job-1', id: await answering });
    } finally {
      await client.close().catch(() => undefined);
      await gateway.close();
    }
  }, 30_000);
});
