/**
 * Configuration problems as a person reads them: the variable, its value (unless the variable
 * holds a secret or a key) and what is expected, e.g. `EVENTFLOW_PORT="abc": expected a port number
 * (an integer from 0 to 65535)`.
 */
import type { z } from 'zod';
import { MAX_CONSUME_ATTEMPTS } from '@eventflow/core';
import { MIN_FRAME_BYTES } from './defaults.js';

/** Variables whose values never appear in a message (they may also be long PEM blocks). */
const secret = /SECRET|PASS|KEY|TOKEN/;

export function describeConfigIssue(issue: z.core.$ZodIssue, values: Readonly<Record<string, unknown>>): string {
  const name = issue.path.join('.');
  const value = values[name];
  const shown = value === undefined || secret.test(name) ? name : `${name}=${JSON.stringify(String(value))}`;
  return `${shown}: ${issue.message}`;
}

/** The messages of the number schemas the configs share: each states the range it accepts. */
export const expected = {
  port: 'expected a port number (an integer from 0 to 65535)',
  positiveInt: `expected a whole number from 1 to ${Number.MAX_SAFE_INTEGER}`,
  nonNegativeInt: `expected a whole number from 0 to ${Number.MAX_SAFE_INTEGER}`,
  cacheMb: 'expected a whole number of MiB from 1 to 65536',
  frameBytes: `expected a whole number of bytes from ${MIN_FRAME_BYTES} (a client's hello with its token must fit) to ${Number.MAX_SAFE_INTEGER}`,
  attempts: `expected a whole number from 1 to ${MAX_CONSUME_ATTEMPTS} (${MAX_CONSUME_ATTEMPTS}: the most a consumer's retry.attempts may ask for)`,
} as const;

/** A number as a person writes one in decimal (an exponent allowed, spaces around it ignored). */
const DECIMAL = /^\s*[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?\s*$/i;

/**
 * The values to parse: those of number settings that are not written in decimal become NaN, so that
 * their schema refuses them with its range. `Number()`, which the schemas coerce with, reads a blank
 * value as 0 (EVENTFLOW_PING_INTERVAL_MS=" " turned liveness off, EVENTFLOW_MAX_PUBLISH_RATE=" " the
 * limit) and "0x10" or "0b11" as 16 or 3. Messages keep showing the value as written.
 */
export function decimalNumbers(shape: Readonly<Record<string, z.core.$ZodType>>, values: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const input: Record<string, unknown> = { ...values };
  for (const [name, value] of Object.entries(values)) {
    const schema = shape[name];
    if (typeof value === 'string' && schema !== undefined && isNumber(schema) && !DECIMAL.test(value)) input[name] = Number.NaN;
  }
  return input;
}

function isNumber(schema: z.core.$ZodType): boolean {
  let at: z.core.$ZodType = schema;
  for (let def = at._zod.def as { type: string; innerType?: z.core.$ZodType }; def.innerType !== undefined && (def.type === 'default' || def.type === 'optional'); def = at._zod.def as typeof def) {
    at = def.innerType;
  }
  return at._zod.def.type === 'number';
}

/**
 * EVENTFLOW_* names in `values` that nothing reads: a typo (`EVENTFLOW_PROT=9000`) would otherwise be
 * ignored silently and the default used. One line each, with the closest known name when one is
 * close. `known` holds whole names, `families` the prefixes of names that others read and check
 * (v4's hub, spoke and certificate settings, the test suites').
 */
export function unknownVariables(values: Readonly<Record<string, unknown>>, known: ReadonlySet<string>, families: readonly string[]): string[] {
  const lines: string[] = [];
  for (const name of Object.keys(values).sort()) {
    if (!name.startsWith('EVENTFLOW_') || known.has(name) || families.some((family) => name.startsWith(family))) continue;
    const closest = closestName(name, known);
    lines.push(`${name} is not a variable of eventflow and is ignored${closest ? `; did you mean ${closest}?` : ''}`);
  }
  return lines;
}

/** The known name nearest to `name` (transpositions count once), if it is near enough to be a typo. */
function closestName(name: string, known: ReadonlySet<string>): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of known) {
    const distance = editDistance(name, candidate);
    if (distance < bestDistance) [best, bestDistance] = [candidate, distance];
  }
  const tail = name.length - 'EVENTFLOW_'.length;
  return bestDistance <= Math.max(2, Math.floor(tail / 4)) ? best : undefined;
}

/** Optimal string alignment distance: insertions, deletions, substitutions and adjacent swaps. */
function editDistance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const row = rows[i] as number[];
      const above = rows[i - 1] as number[];
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      row[j] = Math.min((above[j] as number) + 1, (row[j - 1] as number) + 1, (above[j - 1] as number) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) row[j] = Math.min(row[j] as number, ((rows[i - 2] as number[])[j - 2] as number) + 1);
    }
  }
  return (rows[a.length] as number[])[b.length] as number;
}
