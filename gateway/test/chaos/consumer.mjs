// A competing consumer process for consumers.test.ts: argv[2] = gateway url, argv[3] = file.
// After its handler's work is done (and the delivery not revoked), it appends the event id to
// the file, then resolves, which settles the event as success. So a line means "handled
// successfully here"; the settle itself may still be lost if the process dies right after.
import { appendFileSync } from 'node:fs';
import { createNodeClient } from '@eventflow/node';

const [url, file] = process.argv.slice(2);
const client = createNodeClient(url, { reconnect: { minDelay: 20, maxDelay: 300 }, closeOnSignals: true, onError: () => undefined });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
await client.consume('jobs', 'run', async (event, { signal }) => {
  await sleep(1 + Math.floor(Math.random() * 4));
  if (!signal.aborted) appendFileSync(file, `${event.id}\n`);
});
process.stdout.write('consumer ready\n');
