/**
 * Configuration problems as a person reads them: the variable, its value (unless the variable
 * holds a secret or a key) and what is expected, e.g. `EVENTFLOW_PORT="abc": expected a port number
 * (an integer from 0 to 65535)`.
 */
import type { z } from 'zod';

/** Variables whose values never appear in a message (they may also be long PEM blocks). */
const secret = /SECRET|PASS|KEY|TOKEN/;

export function describeConfigIssue(issue: z.core.$ZodIssue, values: Readonly<Record<string, unknown>>): string {
  const name = issue.path.join('.');
  const value = values[name];
  const shown = value === undefined || secret.test(name) ? name : `${name}=${JSON.stringify(String(value))}`;
  return `${shown}: ${issue.message}`;
}

/** The messages of the number schemas the configs share. */
export const expected = {
  port: 'expected a port number (an integer from 0 to 65535)',
  positiveInt: 'expected a positive integer',
  nonNegativeInt: 'expected an integer of 0 or more',
} as const;
