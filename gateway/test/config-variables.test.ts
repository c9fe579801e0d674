/**
 * A typo in an EVENTFLOW_* variable is said, with the closest name, instead of being ignored
 * silently; the names others read beside the gateway (eventflow v4's, the CLI's and clients') are not.
 * A duration no timer can wait is refused, not run at once.
 */
import { describe, expect, it } from 'vitest';
import { parseConfig, unknownConfigVariables } from '../src/config.js';
import { parseHubConfig } from '../src/v4/hub/config.js';
import { startGateway } from '../src/index.js';
import { createClient, MAX_CONSUME_ATTEMPTS } from '@eventflow/core';

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
    expect(() => parseConfig({ [name]: String(MAX + 1) })).toThrow(new RegExp(`${name}.*expected a whole number of ms from \\d to ${MAX} \\(${MAX}: the longest a timer waits\\)`));
  });

  it('EVENTFLOW_CONSUME_LEASE_MS is at most a tenth of that: an extend grants up to ten leases', () => {
    const most = Math.floor(MAX / 10);
    expect(parseConfig({ EVENTFLOW_CONSUME_LEASE_MS: String(most) }).EVENTFLOW_CONSUME_LEASE_MS).toBe(most);
    expect(() => parseConfig({ EVENTFLOW_CONSUME_LEASE_MS: String(most + 1) })).toThrow(/EVENTFLOW_CONSUME_LEASE_MS.*expected a whole number of ms from 1 to 214748364 \(214748364: an extend grants up to 10 leases/);
  });

  it("the v4 hub's timers too", () => {
    for (const name of ['EVENTFLOW_HUB_PEER_HUB_ONLINE_TIMEOUT', 'EVENTFLOW_HUB_KEEP_ALIVE_INTERVAL', 'EVENTFLOW_HUB_SHEDULED_INTERVAL_DELAY', 'EVENTFLOW_HUB_CLAIM_LEASE_MS']) {
      expect(() => parseHubConfig({ [name]: String(MAX + 1) }), name).toThrow(new RegExp(`${name}.*expected a whole number of ms from 1 to ${MAX}`));
    }
  });
});

describe('number settings are read as written in decimal, and a refusal states the range', () => {
  const work = ['EVENTFLOW_CONSUME_LEASE_MS', 'EVENTFLOW_CONSUME_MAX_ATTEMPTS', 'EVENTFLOW_DRAIN_TIMEOUT_MS', 'EVENTFLOW_PING_INTERVAL_MS', 'EVENTFLOW_MAX_GROUPS_PER_DOMAIN', 'EVENTFLOW_MAX_GROUPS_PER_CONNECTION', 'EVENTFLOW_MAX_PUBLISH_RATE', 'EVENTFLOW_SNAPSHOT_EVERY', 'EVENTFLOW_SQLITE_CACHE_MB'];
  // Number() reads " " as 0: EVENTFLOW_PING_INTERVAL_MS=" " turned liveness off, EVENTFLOW_MAX_PUBLISH_RATE=" " the
  // limit, EVENTFLOW_DRAIN_TIMEOUT_MS=" " the drain; "0x10" and "0b11" were read as 16 and 3.
  it.each(work.flatMap((name) => [' ', '\t', '0x10', '0b11', '30s', '1_000', 'Infinity', '99999999999999999999'].map((value) => [name, value] as const)))(
    '%s=%j stops the start with E_EVENTFLOW_CONFIG, one line naming the variable, its value and the accepted range',
    (name, value) => {
      let error: unknown;
      try {
        parseConfig({ [name]: value });
      } catch (caught) {
        error = caught;
      }
      expect(error).toMatchObject({ code: 'E_EVENTFLOW_CONFIG' });
      const message = (error as Error).message;
      expect(message.startsWith(`invalid gateway configuration: ${name}=${JSON.stringify(value)}: expected a whole number `), message).toBe(true);
      expect(message).toMatch(/ from [01] to \d+/);
      expect(message.split('; expected').length, 'one problem, said once').toBe(1);
    },
  );

  it('decimal values, with an exponent or spaces around them, are read as before', () => {
    expect(parseConfig({ EVENTFLOW_CONSUME_LEASE_MS: ' 1e3 ', EVENTFLOW_CONSUME_MAX_ATTEMPTS: '1', EVENTFLOW_DRAIN_TIMEOUT_MS: '0', EVENTFLOW_PING_INTERVAL_MS: '5.0' })).toMatchObject({
      EVENTFLOW_CONSUME_LEASE_MS: 1000,
      EVENTFLOW_CONSUME_MAX_ATTEMPTS: 1,
      EVENTFLOW_DRAIN_TIMEOUT_MS: 0,
      EVENTFLOW_PING_INTERVAL_MS: 5,
    });
    // An empty value is still unset: the default.
    expect(parseConfig({ EVENTFLOW_PING_INTERVAL_MS: '' }).EVENTFLOW_PING_INTERVAL_MS).toBe(15_000);
  });

  it('EVENTFLOW_SQLITE_CACHE_MB is 1 to 65536 MiB, 64 unless set', () => {
    expect(parseConfig({}).EVENTFLOW_SQLITE_CACHE_MB).toBe(64);
    expect(parseConfig({ EVENTFLOW_SQLITE_CACHE_MB: '1' }).EVENTFLOW_SQLITE_CACHE_MB).toBe(1);
    expect(parseConfig({ EVENTFLOW_SQLITE_CACHE_MB: '65536' }).EVENTFLOW_SQLITE_CACHE_MB).toBe(65_536);
    for (const value of ['0', '65537', '1.5', '-1']) {
      expect(() => parseConfig({ EVENTFLOW_SQLITE_CACHE_MB: value }), value).toThrow(`EVENTFLOW_SQLITE_CACHE_MB=${JSON.stringify(value)}: expected a whole number of MiB from 1 to 65536`);
    }
  });

  it("EVENTFLOW_CONSUME_MAX_ATTEMPTS is 1 to 100, a consumer's retry.attempts range (MAX_CONSUME_ATTEMPTS)", () => {
    expect(MAX_CONSUME_ATTEMPTS).toBe(100);
    expect(parseConfig({}).EVENTFLOW_CONSUME_MAX_ATTEMPTS).toBe(5);
    expect(parseConfig({ EVENTFLOW_CONSUME_MAX_ATTEMPTS: '100' }).EVENTFLOW_CONSUME_MAX_ATTEMPTS).toBe(100);
    for (const value of ['0', '101', '1000000', '2.5', '-1']) {
      expect(() => parseConfig({ EVENTFLOW_CONSUME_MAX_ATTEMPTS: value }), value).toThrow(
        expect.objectContaining({ code: 'E_EVENTFLOW_CONFIG', message: `invalid gateway configuration: EVENTFLOW_CONSUME_MAX_ATTEMPTS=${JSON.stringify(value)}: expected a whole number from 1 to 100 (100: the most a consumer's retry.attempts may ask for)` }),
      );
    }
    // startGateway's options are the same schema: a number past the bound is refused before anything opens.
    expect(() => parseConfig({ EVENTFLOW_CONSUME_MAX_ATTEMPTS: 101 })).toThrow(/from 1 to 100/);
  });

  it('EVENTFLOW_MYSQL_PORT=0 is refused with its own range (1 to 65535), not the listen port\'s', () => {
    expect(() => parseConfig({ EVENTFLOW_MYSQL_PORT: '0' })).toThrow('EVENTFLOW_MYSQL_PORT="0": expected a port number (an integer from 1 to 65535)');
  });

  it("the hub's too", () => {
    expect(() => parseHubConfig({ EVENTFLOW_HUB_KEEP_ALIVE_INTERVAL: ' ' })).toThrow(/EVENTFLOW_HUB_KEEP_ALIVE_INTERVAL=" ": expected a whole number of ms from 1 to/);
    // Before: zod's "Invalid input: expected number, received NaN" and "Too small: expected number to be >=0".
    expect(() => parseHubConfig({ EVENTFLOW_HUB_CLAIM_MAX_REDELIVERIES: ' ' })).toThrow(`EVENTFLOW_HUB_CLAIM_MAX_REDELIVERIES=" ": expected a whole number from 0 to ${Number.MAX_SAFE_INTEGER}`);
    expect(() => parseHubConfig({ EVENTFLOW_HUB_CLAIM_MAX_REDELIVERIES: '-1' })).toThrow(`EVENTFLOW_HUB_CLAIM_MAX_REDELIVERIES="-1": expected a whole number from 0 to ${Number.MAX_SAFE_INTEGER}`);
    expect(() => parseHubConfig({ EVENTFLOW_HUB_CLAIM_LEASE_MS: '500' })).toThrow('EVENTFLOW_HUB_CLAIM_LEASE_MS="500": expected a whole number of ms from 1000 (claim times have whole seconds) to 2147483647');
    expect(() => parseHubConfig({ EVENTFLOW_HUB_EXTERNAL_PORT: '0' })).toThrow('EVENTFLOW_HUB_EXTERNAL_PORT="0": expected a port number (an integer from 1 to 65535)');
  });
});

describe('settings that would leave the gateway serving no one, or open to everyone, without a word', () => {
  it('EVENTFLOW_MAX_FRAME_BYTES below a hello with a token is refused at start, with the least it takes', async () => {
    // Before: EVENTFLOW_MAX_FRAME_BYTES=10 started, and every client was closed 1009 during its handshake.
    expect(() => parseConfig({ EVENTFLOW_MAX_FRAME_BYTES: '10' })).toThrow(
      `EVENTFLOW_MAX_FRAME_BYTES="10": expected a whole number of bytes from 4096 (a client's hello with its token must fit) to ${Number.MAX_SAFE_INTEGER}`,
    );
    expect(parseConfig({ EVENTFLOW_MAX_FRAME_BYTES: '4096' }).EVENTFLOW_MAX_FRAME_BYTES).toBe(4096);
    // The least it takes lets a client with a token through.
    const gateway = await startGateway({ EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: ':memory:', EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_MAX_FRAME_BYTES: 4096 });
    const client = createClient(gateway.url, { token: 'x'.repeat(2_000), onError: () => undefined });
    try {
      await client.ready(AbortSignal.timeout(5_000));
    } finally {
      await client.close();
      await gateway.close();
    }
  });

  it('authentication settings without EVENTFLOW_AUTH=jwt are said at start: the gateway checks no token', async () => {
    const lines: string[] = [];
    const logged: string[] = [];
    const secret = 'a-secret-of-more-than-32-characters-here';
    const gateway = await startGateway(
      { EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: ':memory:', EVENTFLOW_JWT_SECRET: secret, EVENTFLOW_AUTH_ANONYMOUS: 'read' },
      { onConfigWarning: (line) => lines.push(line), logDestination: (line) => logged.push(line) },
    );
    try {
      // Before: nothing; the gateway was open to every connection, which the secret's owner meant to keep out.
      const said = 'EVENTFLOW_JWT_SECRET, EVENTFLOW_AUTH_ANONYMOUS are set, but EVENTFLOW_AUTH is none: no token is checked and every connection may do everything; set EVENTFLOW_AUTH=jwt to authenticate';
      expect(lines).toEqual([said]);
      expect(logged.map((line) => JSON.parse(line) as { level: string; msg: string })).toContainEqual(expect.objectContaining({ level: 'warn', msg: `configuration: ${said}` }));
      expect(logged.join('\n')).not.toContain(secret);
    } finally {
      await gateway.close();
    }
    // With jwt they are what they are for: nothing to say.
    const quiet: string[] = [];
    const authenticating = await startGateway({ EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: ':memory:', EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_AUTH: 'jwt', EVENTFLOW_JWT_SECRET: secret }, { onConfigWarning: (line) => quiet.push(line) });
    await authenticating.close();
    expect(quiet).toEqual([]);
  });
});
