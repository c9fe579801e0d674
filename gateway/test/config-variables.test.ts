/**
 * A typo in an EVENTFLOW_* variable is said, with the closest name, instead of being ignored
 * silently; the names others read beside the gateway (eventflow v4's, the CLI's and clients') are not.
 * A duration no timer can wait is refused, not run at once.
 */
import { describe, expect, it } from 'vitest';
import { parseConfig, unknownConfigVariables } from '../src/config.js';
import { parseHubConfig } from '../src/v4/hub/config.js';
import { startGateway } from '../src/index.js';

describe('unknown EVENTFLOW_* variables', () => {
  it('are named with the closest known variable', () => {
    expect(unknownConfigVariables({ EVENTFLOW_PROT: '9000', EVENTFLOW_SQLITE_PAHT: 'x.db', EVENTFLOW_LOGLEVEL: 'debug', EVENTFLOW_FROBNICATE: '1', PATH: '/bin' })).toEqual([
      'EVENTFLOW_FROBNICATE is not a variable of eventflow and is ignored',
      'EVENTFLOW_LOGLEVEL is not a variable of eventflow and is ignored; did you mean EVENTFLOW_LOG_LEVEL?',
      'EVENTFLOW_PROT is not a variable of eventflow and is ignored; did you mean EVENTFLOW_PORT?',
      'EVENTFLOW_SQLITE_PAHT is not a variable of eventflow and is ignored; did you mean EVENTFLOW_SQLITE_PATH?',
    ]);
  });

  it("leave alone the gateway's own, eventflow v4's (hub, spoke, certificates, MySQL spellings) and the CLI's and clients'", () => {
    expect(
      unknownConfigVariables({
        EVENTFLOW_PORT: '9000',
        EVENTFLOW_MYSQL_PASS: 'x',
        EVENTFLOW_MYSQL_DB: 'shop',
        EVENTFLOW_MYSQL_SOCKET_PATH: '/run/mysqld.sock',
        EVENTFLOW_MYSQL_CHARSET: 'utf8mb4',
        EVENTFLOW_SPOKE_SERDE: '',
        EVENTFLOW_SPOKE_TCP_SOCKET_CLIENT_OPTIONS: '{}',
        EVENTFLOW_HUB_NAME: 'HUB',
        EVENTFLOW_HUB_EXTERNAL_PORT: '50001',
        EVENTFLOW_CERT_PASS_ENCRYPTION_KEY: 'k',
        EVENTFLOW_CERT_LEAF_DAYS: '7',
        EVENTFLOW_URL: 'ws://127.0.0.1:8080/',
        EVENTFLOW_TOKEN: 't',
        EVENTFLOW_TEST_MYSQL_HOST: '127.0.0.1',
      }),
    ).toEqual([]);
  });

  it('are reported by a starting gateway, which starts anyway, on its defaults', async () => {
    const lines: string[] = [];
    const logged: string[] = [];
    const gateway = await startGateway(
      { EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: ':memory:', EVENTFLOW_PROT: 9000 },
      { onConfigWarning: (line) => lines.push(line), logDestination: (line) => logged.push(line) },
    );
    try {
      expect(lines).toEqual(['EVENTFLOW_PROT is not a variable of eventflow and is ignored; did you mean EVENTFLOW_PORT?']);
      expect(logged.map((line) => JSON.parse(line) as { level: string; msg: string })).toContainEqual(
        expect.objectContaining({ level: 'warn', msg: 'configuration: EVENTFLOW_PROT is not a variable of eventflow and is ignored; did you mean EVENTFLOW_PORT?' }),
      );
    } finally {
      await gateway.close();
    }
  });
});

describe('durations in ms', () => {
  const MAX = 2 ** 31 - 1;
  // Node runs a longer timer after 1 ms: a 25-day auth timeout closed every connection at once.
  it.each(['EVENTFLOW_HANDSHAKE_TIMEOUT_MS', 'EVENTFLOW_AUTH_TIMEOUT_MS', 'EVENTFLOW_DRAIN_TIMEOUT_MS', 'EVENTFLOW_READY_TIMEOUT_MS', 'EVENTFLOW_MESH_POLL_MS'])('%s is at most 2^31-1, the longest a timer waits', (name) => {
    expect(parseConfig({ [name]: String(MAX) })[name as 'EVENTFLOW_AUTH_TIMEOUT_MS']).toBe(MAX);
    expect(() => parseConfig({ [name]: String(MAX + 1) })).toThrow(new RegExp(`${name}.*expected at most ${MAX} ms \\(the longest a timer waits\\)`));
  });

  it('EVENTFLOW_CONSUME_LEASE_MS is at most a tenth of that: an extend grants up to ten leases', () => {
    const most = Math.floor(MAX / 10);
    expect(parseConfig({ EVENTFLOW_CONSUME_LEASE_MS: String(most) }).EVENTFLOW_CONSUME_LEASE_MS).toBe(most);
    expect(() => parseConfig({ EVENTFLOW_CONSUME_LEASE_MS: String(most + 1) })).toThrow(/EVENTFLOW_CONSUME_LEASE_MS.*expected at most 214748364 ms \(an extend grants up to 10 leases/);
  });

  it("the v4 hub's timers too", () => {
    for (const name of ['EVENTFLOW_HUB_PEER_HUB_ONLINE_TIMEOUT', 'EVENTFLOW_HUB_KEEP_ALIVE_INTERVAL', 'EVENTFLOW_HUB_SHEDULED_INTERVAL_DELAY', 'EVENTFLOW_HUB_CLAIM_LEASE_MS']) {
      expect(() => parseHubConfig({ [name]: String(MAX + 1) }), name).toThrow(new RegExp(`${name}.*expected at most ${MAX} ms`));
    }
  });
});
