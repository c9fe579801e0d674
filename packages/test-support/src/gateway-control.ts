/**
 * Real gateways for browser tests, driven from the Node process: started, stopped and restarted on
 * the same port and database (temp-gateway.ts). Loaded as the browser project's globalSetup
 * (through Vite, so the workspace sources resolve); the browser commands reach it through
 * `setGatewayControl()`.
 */
import { setGatewayControl, type GatewayControl } from './gateway-commands.js';
import { startTempGateway, type TempGateway } from './temp-gateway.js';

const running = new Map<string, TempGateway>();
let next = 1;

const control: GatewayControl = {
  async start(env = {}) {
    const temp = await startTempGateway(env, 'eventflow-browser-');
    const handle = `g${next++}`;
    running.set(handle, temp);
    return { handle, url: temp.gateway.url };
  },
  async stop(handle) {
    await running.get(handle)?.stop();
  },
  async restart(handle) {
    const temp = running.get(handle);
    if (!temp) throw new Error(`unknown gateway ${handle}`);
    await temp.restart();
  },
  async dispose(handle) {
    const temp = running.get(handle);
    running.delete(handle);
    await temp?.dispose();
  },
  async stats(handle) {
    const temp = running.get(handle);
    if (!temp?.running) throw new Error(`gateway ${handle} is not running`);
    return temp.gateway.dispatcher.stats;
  },
};

export function setup(): void {
  setGatewayControl(control);
}

export async function teardown(): Promise<void> {
  await Promise.all([...running.keys()].map((handle) => control.dispose(handle)));
}
