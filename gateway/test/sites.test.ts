/** The web apps a gateway serves (server/sites.ts): the console at `/`, or at `/console/` beside the demo at `/`. */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startTempGateway, type TempGateway } from '@eventflow/test-support/temp-gateway';

const dir = mkdtempSync(join(tmpdir(), 'eventflow-sites-'));
const app = (name: string): string => {
  const root = join(dir, name);
  mkdirSync(join(root, 'assets'), { recursive: true });
  writeFileSync(join(root, 'index.html'), `<title>${name}</title>`);
  writeFileSync(join(root, 'assets', 'app.js'), `// ${name}`);
  return root;
};
const consoleDir = app('console');
const demoDir = app('demo');
const gateways: TempGateway[] = [];
afterAll(async () => {
  await Promise.all(gateways.map((gateway) => gateway.dispose()));
  rmSync(dir, { recursive: true, force: true });
});

const text = async (url: string): Promise<[number, string]> => {
  const response = await fetch(url, { redirect: 'manual' });
  return [response.status, response.status === 200 ? await response.text() : (response.headers.get('location') ?? '')];
};

describe('served apps', () => {
  it('serves the console at / when there is no demo, with index.html for its routes', async () => {
    const gateway = await startTempGateway({ EVENTFLOW_CONSOLE_DIR: consoleDir });
    gateways.push(gateway);
    const base = gateway.gateway.httpUrl;
    expect(await text(base)).toEqual([200, '<title>console</title>']);
    expect(await text(`${base}assets/app.js`)).toEqual([200, '// console']);
    expect(await text(`${base}anything`)).toEqual([200, '<title>console</title>']);
    expect((await fetch(`${base}healthz`)).status).toBe(200);
  });

  it("never answers the gateway's own routes with an app, also when they are off", async () => {
    const gateway = await startTempGateway({ EVENTFLOW_CONSOLE_DIR: consoleDir, EVENTFLOW_METRICS: 'off' });
    gateways.push(gateway);
    expect((await fetch(`${gateway.gateway.httpUrl}metrics`)).status).toBe(404);
  });

  it('serves the console at /console/ when the demo is at /', async () => {
    const gateway = await startTempGateway({ EVENTFLOW_CONSOLE_DIR: consoleDir, EVENTFLOW_DEMO_DIR: demoDir });
    gateways.push(gateway);
    const base = gateway.gateway.httpUrl;
    expect(await text(base)).toEqual([200, '<title>demo</title>']);
    expect(await text(`${base}console/`)).toEqual([200, '<title>console</title>']);
    expect(await text(`${base}console/assets/app.js`)).toEqual([200, '// console']);
    expect(await text(`${base}console`)).toEqual([308, '/console/']);
    expect(await text(`${base}assets/app.js`)).toEqual([200, '// demo']);
  });

  it('serves nothing with EVENTFLOW_CONSOLE_DIR=off', async () => {
    const gateway = await startTempGateway({ EVENTFLOW_CONSOLE_DIR: 'off' });
    gateways.push(gateway);
    expect((await text(gateway.gateway.httpUrl))[1]).toContain('eventflow gateway');
    expect((await fetch(`${gateway.gateway.httpUrl}nope`)).status).toBe(404);
  });
});
