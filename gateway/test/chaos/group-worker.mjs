// A consumer group member for ledger.test.ts: argv[2] = gateway url, argv[3] = file, argv[4] = group
// ('-' = the default group). Appends `<group> <event id>` to the file when its handler completes.
import { appendFileSync } from 'node:fs';
import { createNodeClient } from '@eventflow/node';

const [url, file, group] = process.argv.slice(2);
const client = createNodeClient(url, { reconnect: { minDelay: 20, maxDelay: 300 }, closeOnSignals: true, onError: () => undefined });
await client.consume('jobs', 'run', async (event) => void appendFileSync(file, `${group} ${event.id}\n`), group === '-' ? {} : { group });
process.stdout.write('member ready\n');
