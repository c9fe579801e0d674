/**
 * A typo in an EVENTFLOW_* variable is said, with the closest name, instead of being ignored
 * silently; the names others read beside the gateway (eventflow v4's, the CLI's and clients') are not.
 */
import { describe, expect, it } from 'vitest';
import { unknownConfigVariables } from '../src/config.js';
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
