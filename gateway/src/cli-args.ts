/**
 * The `eventflow-gateway` command line: which command, or why the arguments are wrong. Settings
 * come from EVENTFLOW_* environment variables, not flags, so that a container, a unit file and a
 * terminal configure the gateway the same way; the only flags are --help and --version.
 */
import { parseArgs } from 'node:util';

export const gatewayUsage = `Usage: eventflow-gateway [--help | --version]
       eventflow-gateway hub [--help]

Starts an eventflow gateway (HTTP + WebSocket on one port), or with "hub" an eventflow v4
compatible TLS hub. Both are configured by EVENTFLOW_* environment variables, for example:

  EVENTFLOW_HOST, EVENTFLOW_PORT     listen address (default 127.0.0.1:8080)
  EVENTFLOW_STORE                    sqlite (default, EVENTFLOW_SQLITE_PATH=./data/eventflow.db) or mysql
  EVENTFLOW_MYSQL_HOST, _PORT, _USER, _PASS, _DB
                                     the MySQL/MariaDB store (eventflow v4's names)
  EVENTFLOW_ROUTER                   local (default), hubs (join an eventflow v4 hub mesh) or nats
                                     (gateways on one MySQL store notify each other, EVENTFLOW_NATS_SERVERS)
  EVENTFLOW_AUTH                     none (default) or jwt
  EVENTFLOW_LOG_LEVEL                debug, info (default), warn, error, silent

Every variable is listed in gateway/README.md ("Configuration"). Stop with Ctrl-C or SIGTERM.

Options:
  -h, --help     Show this help
  -v, --version  Print the version

Exit codes: 0 stopped cleanly, 1 failed while running or stopping, 2 bad command line,
3 invalid configuration, 4 cannot listen on the address, 5 the store cannot be opened or reached,
6 another gateway holds the SQLite file, 7 a MySQL server setting (binlog_format) refuses the
gateway's writes.
`;

export const hubUsage = `Usage: eventflow-gateway hub [--help]

Starts an eventflow v4 compatible TLS hub on the MySQL/MariaDB database of EVENTFLOW_MYSQL_*,
configured by EVENTFLOW_HUB_* (listen and advertised address, name) and EVENTFLOW_CERT_*
(EVENTFLOW_CERT_PASS_ENCRYPTION_KEY is required). See gateway/README.md ("The hub").

Exit codes: as for eventflow-gateway (see eventflow-gateway --help).
`;

export type GatewayCommand =
  | { readonly kind: 'gateway' }
  | { readonly kind: 'hub' }
  | { readonly kind: 'help'; readonly usage: string }
  | { readonly kind: 'version' }
  | { readonly kind: 'usage-error'; readonly problem: string; readonly usage: string; readonly setting?: OptionAsVariable };

/** An unknown option of the gateway's (`--port 9000`) as the variable it would be (EVENTFLOW_PORT) and its value, if given. */
export interface OptionAsVariable {
  readonly variable: string;
  readonly value: string | undefined;
}

/** Reads the arguments after the script name. Never throws. */
export function parseGatewayArgs(argv: readonly string[]): GatewayCommand {
  // The common start: util.parseArgs is a module of its own, ~0.4 ms to load (bench/README.md › start).
  if (argv.length === 0) return { kind: 'gateway' };
  const hub = argv[0] === 'hub';
  const usage = hub ? hubUsage : gatewayUsage;
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(hub ? argv.slice(1) : argv);
  } catch (error) {
    const problem = error instanceof Error ? error.message : String(error);
    // parseArgs's own advice ("place it at the end of the command after '--'") is for positionals, which the gateway has none of.
    const option = /^Unknown option '(-[^'=]+)/.exec(problem)?.[1];
    if (option === undefined) return { kind: 'usage-error', problem, usage };
    const said = `unknown option ${option}: the ${hub ? 'hub' : 'gateway'} takes its settings from EVENTFLOW_* variables, not options (gateway/README.md › Configuration)`;
    return { kind: 'usage-error', problem: said, usage, ...(hub ? {} : { setting: asVariable(option, argv) }) };
  }
  const { values, positionals } = parsed;
  if (values.help) return { kind: 'help', usage };
  if (values.version && !hub) return { kind: 'version' };
  if (values.version) return { kind: 'usage-error', problem: "--version is an option of eventflow-gateway, not of its hub command", usage };
  if (positionals.length > 0) {
    const problem = hub ? `unexpected argument ${JSON.stringify(positionals[0])}` : `unknown command ${JSON.stringify(positionals[0])}; the only command is "hub"`;
    return { kind: 'usage-error', problem, usage };
  }
  return { kind: hub ? 'hub' : 'gateway' };
}

function parse(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    allowPositionals: true,
    strict: true,
    options: {
      help: { type: 'boolean', short: 'h' },
      version: { type: 'boolean', short: 'v' },
    },
  });
}

function asVariable(option: string, argv: readonly string[]): OptionAsVariable {
  const at = argv.findIndex((arg) => arg === option || arg.startsWith(`${option}=`));
  const arg = argv[at] ?? option;
  const next = argv[at + 1];
  const value = arg.includes('=') ? arg.slice(arg.indexOf('=') + 1) : next !== undefined && !next.startsWith('-') ? next : undefined;
  return { variable: `EVENTFLOW_${option.replace(/^-+/, '').toUpperCase().replace(/-/g, '_')}`, value };
}
