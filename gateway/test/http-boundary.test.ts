/**
 * What the gateway's HTTP routes answer a browser (issue 23): only a `Host` the gateway is known by
 * (DNS rebinding: a page of another site whose name resolves to the gateway gets 421, not
 * /metrics or the console), and the apps with a strict Content-Security-Policy and framing headers.
 */
import { request } from 'node:http';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isEventflowError } from '@eventflow/core';
import { parseConfig } from '@eventflow/gateway';
import { startTempGateway, type TempGateway } from '@eventflow/test-support/temp-gateway';
import { connect } from '@eventflow/test-support/raw-socket';

const dir = mkdtempSync(join(tmpdir(), 'eventflow-http-boundary-'));
const consoleDir = join(dir, 'console');
mkdirSync(join(consoleDir, 'assets'), { recursive: true });
writeFileSync(join(consoleDir, 'index.html'), '<title>console</title>');
writeFileSync(join(consoleDir, 'assets', 'app.js'), '// console');
const gateways: TempGateway[] = [];
afterAll(async () => {
  await Promise.all(gateways.map((gateway) => gateway.dispose()));
  rmSync(dir, { recursive: true, force: true });
});

async function start(config: Record<string, string> = {}): Promise<TempGateway> {
  const gateway = await startTempGateway({ EVENTFLOW_CONSOLE_DIR: consoleDir, ...config });
  gateways.push(gateway);
  return gateway;
}

/** GET `path` on the gateway with this `Host` header, as a rebound browser would send it. */
function get(gateway: TempGateway, path: string, host: string): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: gateway.port, path, headers: { host } }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body, headers: response.headers }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('Host', () => {
  it('answers no route under a name the gateway is not known by (421), and every route under loopback names and addresses', async () => {
    const gateway = await start();
    const port = gateway.port;
    for (const path of ['/healthz', '/readyz', '/metrics', '/', '/assets/app.js', '/nothing']) {
      const refused = await get(gateway, path, `attacker.example:${port}`);
      expect(refused.status, path).toBe(421);
      expect(refused.body).toContain('EVENTFLOW_ALLOWED_HOSTS');
      expect(refused.body).not.toContain('console');
    }
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`, `LOCALHOST:${port}`, `app.localhost:${port}`, `10.1.2.3:${port}`, '127.0.0.1']) {
      expect((await get(gateway, '/healthz', host)).status, host).toBe(200);
    }
    for (const host of ['localhost.attacker.example', '127.0.0.1.nip.io', 'user@localhost']) expect((await get(gateway, '/metrics', host)).status, host).toBe(421);
  });

  it('EVENTFLOW_ALLOWED_HOSTS replaces the default list; * allows any name', async () => {
    const listed = await start({ EVENTFLOW_ALLOWED_HOSTS: 'gateway.lan, metrics.internal' });
    expect((await get(listed, '/metrics', 'gateway.lan:8080')).status).toBe(200);
    expect((await get(listed, '/', 'metrics.internal')).status).toBe(200);
    expect((await get(listed, '/healthz', `localhost:${listed.port}`)).status).toBe(421);
    const any = await start({ EVENTFLOW_ALLOWED_HOSTS: '*' });
    expect((await get(any, '/healthz', 'anything.example')).status).toBe(200);
    for (const bad of ['http://gateway.lan', 'gateway.lan:8080', ' , ']) {
      const error = (() => {
        try {
          parseConfig({ EVENTFLOW_ALLOWED_HOSTS: bad });
        } catch (caught) {
          return caught;
        }
        return undefined;
      })();
      expect(isEventflowError(error, 'E_EVENTFLOW_CONFIG'), bad).toBe(true);
      expect((error as Error).message).toContain('EVENTFLOW_ALLOWED_HOSTS');
    }
  });

  it('leaves WebSocket upgrades to the Origin check: a non-browser client connects under any name', async () => {
    const gateway = await start();
    const conn = await connect(gateway.gateway.url, { headers: { host: 'gateway.behind-a-proxy' } });
    await conn.ping();
    conn.ws.close();
  });
});

describe('security headers of the served apps', () => {
  it('serve the console with a strict CSP, no framing, nosniff and no referrer, files and fallbacks alike', async () => {
    const gateway = await start();
    for (const path of ['/', '/assets/app.js', '/some/route']) {
      const { status, headers } = await get(gateway, path, `localhost:${gateway.port}`);
      expect(status, path).toBe(200);
      const csp = String(headers['content-security-policy']);
      for (const directive of ["default-src 'self'", "script-src 'self'", "connect-src 'self' ws: wss:", "frame-ancestors 'none'", "object-src 'none'", "base-uri 'none'"]) {
        expect(csp, path).toContain(directive);
      }
      expect(csp).not.toContain('unsafe');
      expect(headers['x-frame-options']).toBe('DENY');
      expect(headers['x-content-type-options']).toBe('nosniff');
      expect(headers['referrer-policy']).toBe('no-referrer');
    }
  });
});
