/**
 * `eventflow-gateway hub`: runs a v4-compatible hub configured from the environment
 * (EVENTFLOW_HUB_*, EVENTFLOW_MYSQL_*, EVENTFLOW_CERT_*) until SIGINT or SIGTERM.
 */
import { Hub } from './hub.js';
import { parseHubConfig, unknownHubVariables, type HubEnv } from './config.js';
import { stopOnSignals } from '../../shutdown.js';
import { explainStartupFailure } from '../../startup-failure.js';

/** Starts the hub and stops it on SIGINT/SIGTERM, also one that comes while it starts; exits the process with 3–5 if it cannot start. */
export async function runHubCli(env: HubEnv = process.env): Promise<Hub | undefined> {
  // Before anything else: a signal during start must still mark the hub row quit (hub.destroy()).
  const signals = stopOnSignals('hub');
  let hub: Hub;
  let said = false;
  try {
    const config = parseHubConfig(env);
    for (const line of unknownHubVariables(env)) process.stderr.write(`eventflow hub: ${line}\n`);
    // The line for a person first, then the hub's JSON log line, as the gateway does.
    const onStartFailure = (error: unknown): void => {
      said = signals.signal === undefined && process.stderr.write(`${explainStartupFailure(error, 'hub').line}\n`);
    };
    hub = new Hub({ config, onStartFailure });
    signals.stopWith(() => hub.destroy());
    await hub.start();
  } catch (error) {
    // Stopped by a signal while starting: destroy() is finishing and exits the process.
    if (signals.signal !== undefined) return undefined;
    const failure = explainStartupFailure(error, 'hub');
    // A configuration refused before the hub started has not been said yet.
    if (!said) process.stderr.write(`${failure.line}\n`);
    process.exitCode = failure.exitCode;
    return undefined;
  }
  if (signals.signal !== undefined) return hub;
  const { internalIp, internalPort, externalIp, externalPort } = hub.address;
  process.stdout.write(`eventflow hub ${hub.id}\n  listening:  ${internalIp}:${internalPort}\n  advertised: ${externalIp}:${externalPort}\n`);
  return hub;
}
