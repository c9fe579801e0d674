/** The start banner names every URL a person needs, the store, the router and the auth mode. */
import { describe, expect, it } from 'vitest';
import { gatewayBanner } from '../../src/banner.js';
import { parseConfig } from '../../src/config.js';
import { startGateway } from '../../src/index.js';
import { finished, gateway } from './support.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const at = { id: 'G1', url: 'ws://127.0.0.1:8080/', httpUrl: 'http://127.0.0.1:8080/' };

describe('the start banner', () => {
  it('on the embedded store', () => {
    expect(gatewayBanner({ ...at, config: parseConfig({ EVENTFLOW_SQLITE_PATH: '/var/lib/ef.db', EVENTFLOW_DEMO_DIR: '/nonexistent', EVENTFLOW_CONSOLE_DIR: '/nonexistent' }) })).toBe(
      [
        'eventflow gateway G1',
        '  dashboard: none: EVENTFLOW_DEMO_DIR=/nonexistent does not exist; EVENTFLOW_CONSOLE_DIR=/nonexistent does not exist; http://127.0.0.1:8080/ says how to connect',
        '  clients:   ws://127.0.0.1:8080/',
        '  health:    http://127.0.0.1:8080/healthz',
        '  ready:     http://127.0.0.1:8080/readyz',
        '  metrics:   http://127.0.0.1:8080/metrics',
        '  store:     sqlite /var/lib/ef.db',
        '  router:    local (in this process)',
        '  auth:      none (every connection may do everything)',
        '',
      ].join('\n'),
    );
  });

  it('on every interface: URLs a browser opens (not 0.0.0.0) and, without authentication, that other machines can connect', async () => {
    const wide = { id: 'G1', url: 'ws://0.0.0.0:8080/', httpUrl: 'http://0.0.0.0:8080/' };
    const lines = gatewayBanner({ ...wide, config: parseConfig({ EVENTFLOW_HOST: '0.0.0.0', EVENTFLOW_CONSOLE_DIR: 'off' }) }).split('\n');
    // Before: "clients:   ws://0.0.0.0:8080/" and the rest at 0.0.0.0, which Chrome refuses to open, and "auth: none (every
    // connection may do everything)" as on loopback.
    expect(lines.slice(1, 4)).toEqual([
      "  listening: every interface (EVENTFLOW_HOST=0.0.0.0); from another machine, this one's address on port 8080",
      '  dashboard: none: the console is off (EVENTFLOW_CONSOLE_DIR=off); http://127.0.0.1:8080/ says how to connect',
      '  clients:   ws://127.0.0.1:8080/',
    ]);
    expect(lines).toContain(
      '  auth:      none (every connection may do everything), and EVENTFLOW_HOST=0.0.0.0 lets other machines connect: set EVENTFLOW_AUTH=jwt, or keep the port behind a proxy that authenticates',
    );
    // And in the log, which is what a container's operator reads.
    const logged: string[] = [];
    const running = await startGateway({ EVENTFLOW_HOST: '0.0.0.0', EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: ':memory:', EVENTFLOW_LOG_LEVEL: 'warn' }, { logDestination: (line) => void logged.push(line) });
    await running.close();
    expect(logged.map((line) => JSON.parse(line) as { msg: string; host?: string })).toContainEqual(
      expect.objectContaining({ msg: 'listening beyond this machine without authentication: set EVENTFLOW_AUTH=jwt, or keep the port behind a proxy that authenticates', host: '0.0.0.0' }),
    );
  });

  it('says why nothing is served at /: the console turned off is not a build to make', () => {
    const banner = (env: Record<string, string>): string => gatewayBanner({ ...at, config: parseConfig(env) }).split('\n')[1] ?? '';
    expect(banner({ EVENTFLOW_CONSOLE_DIR: 'off' })).toBe('  dashboard: none: the console is off (EVENTFLOW_CONSOLE_DIR=off); http://127.0.0.1:8080/ says how to connect');
    expect(banner({ EVENTFLOW_CONSOLE_DIR: 'off', EVENTFLOW_DEMO_DIR: '/nonexistent' })).toBe(
      '  dashboard: none: EVENTFLOW_DEMO_DIR=/nonexistent does not exist; the console is off (EVENTFLOW_CONSOLE_DIR=off); http://127.0.0.1:8080/ says how to connect',
    );
  });

  it('on MySQL with jwt and metrics off, never showing the secret', () => {
    const config = parseConfig({
      EVENTFLOW_STORE: 'mysql',
      EVENTFLOW_MYSQL_HOST: 'db.internal',
      EVENTFLOW_MYSQL_USER: 'ef',
      EVENTFLOW_MYSQL_PASS: 'hunter2',
      EVENTFLOW_MYSQL_DB: 'shop',
      EVENTFLOW_AUTH: 'jwt',
      EVENTFLOW_JWT_SECRET: 'x'.repeat(32),
      EVENTFLOW_AUTH_ANONYMOUS: 'read',
      EVENTFLOW_METRICS: 'off',
    });
    const banner = gatewayBanner({ ...at, config });
    expect(banner).toContain('  store:     mysql ef@db.internal:3306, database shop\n');
    expect(banner).toContain('  auth:      jwt (HS256 secret; without a token: read)\n');
    expect(banner).toContain('  metrics:   off (EVENTFLOW_METRICS=off)\n');
    expect(banner).not.toMatch(/hunter2|xxxxxxxx/);
  });

  it('is what the real process prints once it listens', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'eventflow-banner-'));
    const running = gateway([], { EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: join(dir, 'e.db'), EVENTFLOW_LOG_LEVEL: 'warn' });
    try {
      await running.printed('  auth:');
      expect(running.stdout()).toMatch(/^eventflow gateway \S+\n {2}dashboard: .*\n {2}clients: {3}ws:\/\/127\.0\.0\.1:\d+\/\n {2}health: {4}http:\/\/127\.0\.0\.1:\d+\/healthz\n {2}ready: {5}http:\/\/127\.0\.0\.1:\d+\/readyz\n {2}metrics: {3}http:\/\/127\.0\.0\.1:\d+\/metrics\n {2}store: {5}sqlite .*e\.db\n {2}router: {4}local .*\n {2}auth: {6}none /);
    } finally {
      running.proc.kill('SIGTERM');
      expect((await finished(running)).code).toBe(0);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
