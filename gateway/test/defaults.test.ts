/**
 * The README's configuration table states the defaults of gateway/src/defaults.ts: every variable
 * with a default has a row, and the row's default is that value. The consumer defaults (credit,
 * retry policy, attempts) are stated in four READMEs, each where a user reads about consuming:
 * they say the numbers the code applies.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DEFAULT_CONSUME_CONCURRENCY, MAX_CONSUME_CONCURRENCY } from '@eventflow/core';
import { configDefaults } from '../src/defaults.js';
import { configSchema } from '../src/config.js';
import { RETRY_DEFAULTS } from '../src/delivery/retry-policy.js';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
const read = (path: string): string => readFileSync(new URL(path, import.meta.url), 'utf8').replace(/\s+/g, ' ');

/** Variable → the default cell of its row, for every row of the table under "## Configuration". */
function tableDefaults(): Map<string, string> {
  const section = readme.slice(readme.indexOf('## Configuration'), readme.indexOf('\n## ', readme.indexOf('## Configuration') + 1));
  const found = new Map<string, string>();
  for (const line of section.split('\n')) {
    const cells = line.split(' | ');
    if (!line.startsWith('| `EVENTFLOW_') || cells.length < 3) continue;
    const names = [...cells[0]!.matchAll(/`(EVENTFLOW_[A-Z0-9_]+|_[A-Z0-9_]+)`/g)].map((match) => match[1]!);
    const values = cells[1]!.split(' / ');
    // `EVENTFLOW_MYSQL_HOST` / `_PORT` / …: a short name replaces the first one's last word.
    const prefix = names[0]!.slice(0, names[0]!.lastIndexOf('_'));
    names.forEach((name, index) => found.set(name.startsWith('_') ? `${prefix}${name}` : name, values.length === names.length ? values[index]! : values[0]!));
  }
  return found;
}

/** How the README writes a default: `1048576` (1 MiB), `empty`, `sqlite`. */
function written(cell: string): string {
  const code = /^`([^`]*)`/.exec(cell.trim());
  if (code) return code[1]!;
  return cell.trim() === 'empty' ? '' : cell.trim();
}

describe('gateway defaults', () => {
  it('config.ts applies the defaults of defaults.ts', () => {
    const parsed = configSchema.parse({});
    for (const [name, value] of Object.entries(configDefaults)) expect(parsed[name as keyof typeof parsed], name).toEqual(value);
  });

  it("the README's configuration table states every default of defaults.ts", () => {
    const table = tableDefaults();
    const v4Spelling: Record<string, string> = { EVENTFLOW_MYSQL_PASSWORD: 'EVENTFLOW_MYSQL_PASS', EVENTFLOW_MYSQL_DATABASE: 'EVENTFLOW_MYSQL_DB' };
    for (const [name, value] of Object.entries(configDefaults)) {
      const cell = table.get(name) ?? table.get(v4Spelling[name] ?? name);
      expect(cell, `${name} has a row in the README's configuration table`).toBeDefined();
      expect(written(cell!), name).toBe(String(value));
    }
  });

  it('the READMEs state the consumer defaults that the client and gateway apply', () => {
    const options = readme.slice(readme.indexOf('### Consumer options'), readme.indexOf('**Leases.**'));
    const row = (option: string): string => options.split('\n').find((line) => line.startsWith(`| \`${option}\` |`)) ?? '';
    expect(row('concurrency')).toContain(`| \`${DEFAULT_CONSUME_CONCURRENCY}\` (\`DEFAULT_CONSUME_CONCURRENCY\`; 1–${MAX_CONSUME_CONCURRENCY})`);
    expect(row('retry')).toContain(`delayMs: ${RETRY_DEFAULTS.delayMs}, maxDelayMs: ${RETRY_DEFAULTS.maxDelayMs} }`);
    expect(row('retry')).toContain(`\`backoff\` to \`'${RETRY_DEFAULTS.backoff}'\``);
    expect(options.replace(/\s+/g, ' ')).toContain(`\`EVENTFLOW_CONSUME_MAX_ATTEMPTS\` deliveries (default ${configDefaults.EVENTFLOW_CONSUME_MAX_ATTEMPTS})`);
    expect(read('../../README.md')).toContain(`Defaults (\`concurrency\` ${DEFAULT_CONSUME_CONCURRENCY}, not ordered`);
    expect(read('../../README.md')).toContain(`after ${configDefaults.EVENTFLOW_CONSUME_MAX_ATTEMPTS} attempts it is failed and kept as a dead letter`);
    expect(read('../../packages/node/README.md')).toContain(`run at once (default ${DEFAULT_CONSUME_CONCURRENCY})`);
    expect(read('../../packages/core/README.md')).toContain(`\`concurrency\` (default ${DEFAULT_CONSUME_CONCURRENCY})`);
    expect(read('../../packages/core/README.md')).toContain(`the gateway's maximum attempts (${configDefaults.EVENTFLOW_CONSUME_MAX_ATTEMPTS})`);
  });
});
