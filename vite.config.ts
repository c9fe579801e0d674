import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { playwright } from '@vitest/browser-playwright';
// Relative on purpose: the config is bundled and run by Node before Vite resolves any workspace source.
import { chromiumArgs, chromiumPath } from './packages/test-support/src/chromium.js';
import { gatewayCommands } from './packages/test-support/src/gateway-commands.js';

/**
 * Workspace packages export their TypeScript sources under the "source" condition, so tests run
 * against src/ without a build.
 */
const conditions = ['source', 'module', 'browser', 'import', 'default'];
const nodeConditions = ['source', 'module', 'node', 'import', 'default'];

/**
 * The same, as aliases: a globalSetup (packages/test-support/src/gateway-control.ts) is loaded by
 * Vite's module runner without the "source" condition, so workspace imports are pointed at their
 * sources here. @eventflow/test-support has no build: its exports are its sources.
 */
const source = (path: string): string => fileURLToPath(new URL(path, import.meta.url));
const alias = [
  { find: /^@eventflow\/core$/, replacement: source('./packages/core/src/index.ts') },
  { find: /^@eventflow\/core\/protocol$/, replacement: source('./packages/core/src/protocol.ts') },
  { find: /^@eventflow\/node$/, replacement: source('./packages/node/src/index.ts') },
  { find: /^@eventflow\/node\/commands$/, replacement: source('./packages/node/src/commands.ts') },
  { find: /^@eventflow\/browser\/react$/, replacement: source('./packages/browser/src/react.ts') },
  { find: /^@eventflow\/browser\/outbox$/, replacement: source('./packages/browser/src/outbox.ts') },
  { find: /^@eventflow\/browser\/work$/, replacement: source('./packages/browser/src/work.ts') },
  { find: /^@eventflow\/browser$/, replacement: source('./packages/browser/src/index.ts') },
  { find: /^@eventflow\/gateway$/, replacement: source('./gateway/src/index.ts') },
  { find: /^@eventflow\/test-support\/(.+)$/, replacement: source('./packages/test-support/src/$1.ts') },
  { find: /^@eventflow\/bench\/v4-compose$/, replacement: source('./bench/v4-compose.mjs') },
  { find: /^@eventflow\/bench\/chromium$/, replacement: source('./bench/chromium.mjs') },
];

/**
 * The integration suites: a MariaDB server, the v4 mesh (hubs, TLS, certificates), child processes
 * killed with SIGKILL, fuzzing, or long runs. Every other Node test file of the packages and gateway
 * runs in the fast project: Node only, SQLite only, in-process gateways.
 */
const integration = [
  'gateway/test/mysql-store.test.ts',
  'gateway/test/leases.mysql.test.ts',
  'gateway/test/work.mysql.test.ts',
  'gateway/test/upgrade.test.ts',
  'gateway/test/snapshots.mysql.test.ts',
  'gateway/test/observability.test.ts',
  'gateway/test/hub.test.ts',
  'gateway/test/mesh.test.ts',
  'gateway/test/nats.test.ts',
  'gateway/test/nats-faults.test.ts',
  'gateway/test/nats-unannounced.test.ts',
  'gateway/test/store-outage.test.ts',
  'gateway/test/disk-full.test.ts',
  'gateway/test/mesh-v4-mix.test.ts',
  'gateway/test/mesh-own-jobs.test.ts',
  'gateway/test/certificates.test.ts',
  'gateway/test/fuzz.test.ts',
  'gateway/test/chaos/**/*.test.ts',
  'packages/core/test/state.fuzz.test.ts',
  'packages/core/test/state.exact-fold.test.ts',
  'packages/core/test/state.browser-build.test.ts',
  // Processes spawned (npx, npm pack, start-up failures), a private or shared MariaDB, fuzzing and
  // load: each takes seconds to tens of seconds, which the fast project must not.
  'gateway/test/cli/**/*.test.ts',
  // Chromium, the bin as a child process (OTLP exporters), a MariaDB: a few seconds.
  'gateway/test/tracing.test.ts',
  'gateway/test/mysql-sql-mode.test.ts',
  'gateway/test/mysql-binlog.test.ts',
  'gateway/test/data-keys.test.ts',
  'gateway/test/availability.test.ts',
  'gateway/test/bad-input.test.ts',
  'gateway/test/http-fuzz.test.ts',
  // A million rows read by replays while another client is timed: seconds of CPU.
  'gateway/test/replay-fairness.test.ts',
];
const nodeTests = ['packages/*/test/**/*.test.ts', 'gateway/test/**/*.test.ts'];
/** Built apps (the demo, the console) in Chromium against a real gateway. */
const e2e = ['demo/test/**/*.test.ts', 'packages/console/test/**/*.test.ts'];
const browserTests = '**/*.browser.test.{ts,tsx}';

/**
 * Two Node test files at a time: Vitest picks one worker on a 2-core machine (cores - 1), and most of
 * a Node test's time is waiting on a store, a lease or a child process, not CPU (the whole suite in
 * CI: 962 s of tests one at a time; fast and integration with two, 157 s + 340 s). Every file makes
 * its own gateways on random ports, its own databases, subject prefixes and temp directories, so two
 * never share state. Chromium's projects run after them, one file at a time (its own group: Vitest
 * runs projects with different maxWorkers in different groups, one group after the other).
 */
const NODE_POOL = { maxWorkers: 2, sequence: { groupOrder: 0 } };
const ONE_AT_A_TIME = { maxWorkers: 1, sequence: { groupOrder: 1 } };

export default defineConfig({
  resolve: { conditions, alias },
  // Vitest also hands these to Node (`--conditions`) for the packages it leaves to Node's loader:
  // "module" there would make Node load bundler-only builds (@opentelemetry/api's build/esm, which
  // prom-client requires, has extensionless imports).
  ssr: { resolve: { conditions: nodeConditions.filter((condition) => condition !== 'module'), externalConditions: ['source'] } },
  test: {
    projects: [
      {
        extends: true,
        resolve: { conditions: nodeConditions },
        test: {
          name: 'fast',
          include: nodeTests,
          exclude: [browserTests, ...integration, ...e2e],
          ...NODE_POOL,
          testTimeout: 20_000,
          hookTimeout: 20_000,
        },
      },
      {
        extends: true,
        resolve: { conditions: nodeConditions },
        test: {
          name: 'integration',
          include: integration,
          ...NODE_POOL,
          testTimeout: 20_000,
          hookTimeout: 20_000,
        },
      },
      {
        // Real Chromium (Debian's), real IndexedDB and BroadcastChannel, a real gateway driven
        // from the browser through the commands in packages/test-support/src/gateway-commands.ts.
        extends: true,
        test: {
          name: 'browser',
          include: ['packages/browser/test/**/*.browser.test.{ts,tsx}'],
          ...ONE_AT_A_TIME,
          globalSetup: ['packages/test-support/src/gateway-control.ts'],
          testTimeout: 20_000,
          hookTimeout: 20_000,
          browser: {
            enabled: true,
            headless: true,
            provider: playwright({ launchOptions: { executablePath: chromiumPath, args: chromiumArgs } }),
            instances: [{ browser: 'chromium' }],
            commands: gatewayCommands,
            screenshotFailures: false,
          },
        },
      },
      {
        extends: true,
        resolve: { conditions: nodeConditions },
        test: {
          name: 'e2e',
          include: e2e,
          ...ONE_AT_A_TIME,
          testTimeout: 120_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});
