/**
 * `eventflow-gateway hub`: runs a v4-compatible hub configured from the environment
 * (EVENTFLOW_HUB_*, EVENTFLOW_MYSQL_*, EVENTFLOW_CERT_*) until SIGINT or SIGTERM.
 */
import { Hub } from './hub.js';
import { parseHubConfig, type HubEnv } from './config.js';
import { stopOnSignals } from '../../shutdown.js';
import { explainStartupFailure } from '../../startup-failure.js';

/** Starts the hub and stops it on SIGINT/SIGTERM, also one that comes while it starts; exits the process with 3–5 if it cannot start. */
export async function runHubCli(env: HubEnv = process.env): Promise<Hub | undefined> {
  // Before anything else: a signal during start must still mark the hub row quit (hub.destroy()).
  const signals = stopOnSignals('hub');
  let hub: Hub;
  try {
    const config = parseHubConfig(env);
    hub = new Hub({ config });
    signals.stopWith(() => hub.destroy());
    await hub.start();
  } catch (error) {
    // Stopped by a signal while starting: destroy() is finishing and exits the process.
    if (signals.signal !== undefined) return undefined;
    const failure = explainStartupFailure(error, 'hub');
    process.stderr.write(`${failure.line}\n`);
    process.exitCode = failure.exitCode;
    return undefined;
  }
  if (signals.signal !== undefined) return hub;
  const { internalIp, internalPort, externalIp, externalPort } = hub.address;
  process.stdout.write(`eventflow hub ${hub.id}\n  listening:  ${internalIp}:${internalPort}\n  advertised: ${externalIp}:${externalPort}\n`);
  return hub;
}
