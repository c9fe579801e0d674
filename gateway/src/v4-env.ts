/**
 * eventflow v4's environment, read by the gateway and the hub (eventflow-v4.md §1.4). v4 spells two
 * MySQL variables differently from us: a v4 deployment's EVENTFLOW_MYSQL_PASS and EVENTFLOW_MYSQL_DB
 * must not silently fall back to our defaults, so they are read as aliases of EVENTFLOW_MYSQL_PASSWORD
 * and EVENTFLOW_MYSQL_DATABASE, and two spellings with different values refuse the start. v4
 * variables that would change what is stored or where we connect, and that we do not implement,
 * refuse the start too rather than being ignored.
 */

/** [our name, v4's name]. */
export const v4Aliases = [
  ['EVENTFLOW_MYSQL_PASSWORD', 'EVENTFLOW_MYSQL_PASS'],
  ['EVENTFLOW_MYSQL_DATABASE', 'EVENTFLOW_MYSQL_DB'],
] as const;

/** v4 variables we do not implement, with the values that mean what we do anyway. */
export const unsupported: ReadonlyArray<{ name: string; accepted: readonly string[]; why: string }> = [
  { name: 'EVENTFLOW_MYSQL_SOCKET_PATH', accepted: [], why: 'connecting through a socket file is not supported; unset it and set EVENTFLOW_MYSQL_HOST and EVENTFLOW_MYSQL_PORT' },
  { name: 'EVENTFLOW_MYSQL_SSL', accepted: [], why: 'TLS to MySQL is not supported yet; unset it (and connect over a trusted network or a tunnel)' },
  { name: 'EVENTFLOW_MYSQL_TIMEZONE', accepted: ['Z', '+00:00'], why: "dates are always written and read as UTC ('Z', as v4's default); unset it" },
  { name: 'EVENTFLOW_MYSQL_CHARSET', accepted: ['utf8mb4', 'UTF8MB4'], why: 'the connection charset is always utf8mb4 (v4\'s default); unset it' },
  { name: 'EVENTFLOW_SPOKE_SERDE', accepted: [], why: 'v4 spokes with SERDE store encoded event data, which this gateway does not read (any value, even "false", turns SERDE on in v4); unset it' },
];

type Values = Record<string, string | number | undefined>;

const isSet = (value: string | number | undefined): value is string | number => value !== undefined && value !== '';

/**
 * `values` with v4's spellings copied to ours, and the problems (one line each, naming the
 * variables) that must refuse the start. Values of these variables are secret or harmless; the
 * messages name the variables only.
 */
export function readV4Environment(values: Values): { values: Values; problems: string[] } {
  const result: Values = { ...values };
  const problems: string[] = [];
  for (const [ours, theirs] of v4Aliases) {
    const our = values[ours];
    const their = values[theirs];
    if (!isSet(their)) continue;
    if (isSet(our) && String(our) !== String(their)) {
      problems.push(`${theirs} (eventflow v4's name) and ${ours} are both set, to different values; set only one of them`);
      continue;
    }
    result[ours] = their;
  }
  for (const { name, accepted, why } of unsupported) {
    const value = values[name];
    if (isSet(value) && !accepted.includes(String(value))) problems.push(`${name}: ${why}`);
  }
  return { values: result, problems };
}
