import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { playwright } from '@vitest/browser-playwright';
import { chromiumArgs, chromiumPath } from './test-support/chromium.js';
import { gatewayCommands } from './test-support/gateway-commands.js';

/**
 * Workspace packages export their TypeScript sources under the "source" condition, so tests run
 * against src/ without a build.
 */
const conditions = ['source', 'module', 'browser', 'import', 'default'];
const nodeConditions = ['source', 'module', 'node', 'import', 'default'];

/**
 * The same, as aliases: a globalSetup (test-support/gateway-control.ts) is loaded by Vite's module
 * runner without the "source" condition, so workspace imports are pointed at their sources here.
 */
const source = (path: string): string => fileURLToPath(new URL(path, import.meta.url));
const alias = [
  { find: /^@eventflow\/core$/, replacement: source('./packages/core/src/index.ts') },
  { find: /^@eventflow\/core\/protocol$/, replacement: source('./packages/core/src/protocol.ts') },
  { find: /^@eventflow\/node$/, replacement: source('./packages/node/src/index.ts') },
  { find: /^@eventflow\/browser\/react$/, replacement: source('./packages/browser/src/react.ts') },
  { find: /^@eventflow\/browser$/, replacement: source('./packages/browser/src/index.ts') },
];

export default defineConfig({
  resolve: { conditions, alias },
  ssr: { resolve: { conditions: nodeConditions, externalConditions: ['source'] } },
  test: {
    projects: [
      {
        extends: true,
        resolve: { conditions: nodeConditions },
        test: {
          name: 'unit',
          include: ['packages/*/test/**/*.test.ts', 'gateway/test/**/*.test.ts'],
          exclude: ['**/*.browser.test.{ts,tsx}'],
          testTimeout: 20_000,
          hookTimeout: 20_000,
        },
      },
      {
        // Real Chromium (Debian's), real IndexedDB and BroadcastChannel, a real gateway driven
        // from the browser through the commands in test-support/gateway-commands.ts.
        extends: true,
        test: {
          name: 'browser',
          include: ['packages/browser/test/**/*.browser.test.{ts,tsx}'],
          globalSetup: ['test-support/gateway-control.ts'],
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
          include: ['demo/test/**/*.test.ts'],
          testTimeout: 120_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});
