/**
 * `eventflow-gateway hub`: runs a v4-compatible hub configured from the environment
 * (EVENTFLOW_HUB_*, EVENTFLOW_MYSQL_*, EVENTFLOW_CERT_*) until SIGINT or SIGTERM.
 */
import { Hub } from './hub.js';
import { parseHubConfig, type HubEnv } from './hub-config.js';
import { stopOnSignals } from '../shutdown.js';

/** Starts the hub and stops it on SIGINT/SIGTERM; exits the process with 1 if it cannot start. */
export async function runHubCli(env: HubEnv = process.env): Promise<Hub | undefined> {
  let hub: Hub;
  try {
    hub = new Hub({ config: parseHubConfig(env) });
    await hub.start();
  } catch (error) {
    const code = error instanceof Error ? (error as { code?: unknown }).code : undefined;
    const message = typeof code === 'string' ? `${code}: ${(error as Error).message}` : String(error);
    process.stderr.write(`eventflow hub failed to start: ${message}\n`);
    process.exitCode = 1;
    return undefined;
  }
  const { internalIp, internalPort, externalIp, externalPort } = hub.address;
  process.stdout.write(`eventflow hub ${hub.id}\n  listening:  ${internalIp}:${internalPort}\n  advertised: ${externalIp}:${externalPort}\n`);
  stopOnSignals('hub', () => hub.destroy());
  return hub;
}
