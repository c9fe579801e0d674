/**
 * The `eventflow` command line: publish, tail, read and state against a gateway, the operator's
 * commands (manage-commands.ts), and `token`, which mints a token offline (token.ts). `runCli` takes
 * the arguments after the script name and its I/O as parameters, so tests run it in-process;
 * `cli.ts` (the bin) only hands it `process.argv`.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { EventflowError, generateEventId, isErrorCode, type EventflowClient, type JsonObject, type StoredEvent } from '@eventflow/core';
import { describeIssues, identifier, jsonObject } from '@eventflow/core/protocol';
import { createNodeClient } from './index.js';
import { manageCommands, manageUsage, prepareManage } from './manage-commands.js';
import { NotFound } from './cli-not-found.js';
import { DEFAULT_EXPIRES, mintToken, tokenActions } from './token.js';
import { connectionFailure, connectionWait, gatewayBusy, withTimeoutHint, withTokenHint } from './cli-hints.js';

export interface CliWriter {
  write(chunk: string): unknown;
}

export interface CliIo {
  stdout?: CliWriter;
  stderr?: CliWriter;
  /** Read for EVENTFLOW_URL, EVENTFLOW_TOKEN, and `token`'s EVENTFLOW_JWT_* (default process.env). */
  env?: Readonly<Record<string, string | undefined>>;
  /** Stops `tail` when aborted (default: SIGINT or SIGTERM). */
  signal?: AbortSignal;
}

export const DEFAULT_URL = 'ws://127.0.0.1:8080/';
const DEFAULT_TIMEOUT = 10_000;
/** The most dead letters the gateway answers in one page (the deadLetters operation's `limit`). */
const MAX_PAGE = 1_000;

/**
 * The options only some commands take: given to another command, one would be ignored without a
 * word, and `groups --limit 10` or `tail --id x` seem to have done what they did not. (--url,
 * --token and --timeout are taken by all, as an alias may always pass them.)
 */
const optionsOf: Readonly<Record<string, readonly string[]>> = {
  id: ['publish'],
  rid: ['publish'],
  limit: ['dead-letters'],
  offset: ['dead-letters'],
  secret: ['token'],
  sub: ['token'],
  allow: ['token'],
  expires: ['token'],
  issuer: ['token'],
  audience: ['token'],
};

export const usage = `Usage: eventflow <command> [options]

Commands:
  publish <domain> <name> <pid> [json-data]  Publish an event (data: a JSON object); prints its id
  tail <domain> [name]                       Print routed events as JSON lines until Ctrl-C (name: * by default)
  read <domain> <pid>                        Print the eventlog of a process as JSON lines, oldest first
  state <domain> <pid>                       Print the composed state of a process as JSON
${manageUsage}  token --sub <who> --allow <grant> [--allow <grant>…] [--expires 1h]
                                             Print a token signed with the gateway's EVENTFLOW_JWT_SECRET (offline)

Options:
  --url <url>      Gateway WebSocket URL (default: $EVENTFLOW_URL, else ${DEFAULT_URL})
  --token <jwt>    Token for a gateway with EVENTFLOW_AUTH=jwt (default: $EVENTFLOW_TOKEN)
  --id <id>        publish: the event id (default: generated; reusing one makes a retry idempotent)
  --rid <id>       publish: the id of the event this one refers to
  --timeout <ms>   Time allowed to connect and for each request (default: ${DEFAULT_TIMEOUT})
  --limit <n>      dead-letters: at most this many, 1 to ${MAX_PAGE} (default 100)
  --offset <n>     dead-letters: skip this many (paging)
  --secret <s>     token: the gateway's EVENTFLOW_JWT_SECRET (default: $EVENTFLOW_JWT_SECRET;
                   the variable keeps it out of the process list)
  --sub <who>      token: whom the token is for (its "sub" claim)
  --allow <grant>  token: <domain-pattern>:<action>[,<action>…], repeatable; patterns use * for any
                   run of characters; actions: ${tokenActions.join(', ')}, or * for all
  --expires <d>    token: lifetime, e.g. 90s, 15m, 1h, 7d (default: ${DEFAULT_EXPIRES}; the gateway caps it)
  --issuer, --audience  token: "iss" / "aud" (default: $EVENTFLOW_JWT_ISSUER / $EVENTFLOW_JWT_AUDIENCE)
  -h, --help       Show this help
  -v, --version    Print the version

Errors are printed as "code: message" on stderr, with exit code 1; so is a command that found
nothing to act on (E_EVENTFLOW_GROUP_NOT_FOUND, E_EVENTFLOW_DEAD_LETTER_NOT_FOUND,
E_EVENTFLOW_PROCESS_NOT_FOUND), after its JSON on stdout. A bad command line (unknown command
or option, wrong number of arguments) exits with 2 and this help.

First token: the gateway's secret is the key, e.g.
  export EVENTFLOW_TOKEN=$(EVENTFLOW_JWT_SECRET=… eventflow token --sub ops --allow '*:read,subscribe,consume,manage')
  (groups and dead-letters need consume; group-delete, dead-letter-requeue and -discard need manage)
`;

interface Command {
  readonly args: readonly string[];
  readonly min: number;
  readonly max: number;
}

const commands: Record<string, Command> = {
  publish: { args: ['domain', 'name', 'pid', 'json-data'], min: 3, max: 4 },
  tail: { args: ['domain', 'name'], min: 1, max: 2 },
  read: { args: ['domain', 'pid'], min: 2, max: 2 },
  state: { args: ['domain', 'pid'], min: 2, max: 2 },
  ...manageCommands,
  token: { args: [], min: 0, max: 0 },
};

/** Exit code of a bad command line (as the gateway's bin and most Unix tools). */
export const USAGE_EXIT_CODE = 2;

/** Runs one command; resolves with the exit code (0 ok, 1 error, 2 bad command line). Never throws. */
export async function runCli(argv: readonly string[], io: CliIo = {}): Promise<number> {
  const stdout = io.stdout ?? process.stdout;
  const stderr = io.stderr ?? process.stderr;
  const fail = (error: unknown, withUsage = false): number => {
    stderr.write(`${formatError(error)}\n`);
    if (withUsage) stderr.write(`\n${usage}`);
    return withUsage ? USAGE_EXIT_CODE : 1;
  };

  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    return fail(error, true);
  }
  const { values, positionals } = parsed;
  if (values.help) {
    stdout.write(usage);
    return 0;
  }
  if (values.version) {
    stdout.write(`eventflow ${packageVersion()}\n`);
    return 0;
  }
  const [name, ...args] = positionals;
  if (name === undefined) return fail(new EventflowError('E_EVENTFLOW_INVALID_INPUT', 'no command given'), true);
  const command = Object.hasOwn(commands, name) ? commands[name] : undefined;
  if (!command) return fail(new EventflowError('E_EVENTFLOW_INVALID_INPUT', `unknown command ${JSON.stringify(name)}`), true);
  if (args.length < command.min || args.length > command.max) {
    const expected = command.args.map((arg, i) => (i < command.min ? `<${arg}>` : `[${arg}]`)).join(' ');
    return fail(new EventflowError('E_EVENTFLOW_INVALID_INPUT', `${name} takes ${expected}, got ${args.length} argument(s)`), true);
  }

  const misplaced = Object.keys(values).find((option) => optionsOf[option]?.includes(name) === false);
  if (misplaced !== undefined) {
    return fail(new EventflowError('E_EVENTFLOW_INVALID_INPUT', `${name} does not take --${misplaced}: it is an option of ${optionsOf[misplaced]?.join(', ')} only`), true);
  }

  const env = io.env ?? process.env;
  const setting = (value: string | undefined, variable: string): string | undefined => value ?? (env[variable] === '' ? undefined : env[variable]);
  if (name === 'token') {
    try {
      const minted = mintToken({
        secret: setting(values.secret, 'EVENTFLOW_JWT_SECRET') ?? '',
        subject: values.sub ?? '',
        allow: values.allow ?? [],
        expires: values.expires ?? DEFAULT_EXPIRES,
        issuer: setting(values.issuer, 'EVENTFLOW_JWT_ISSUER'),
        audience: setting(values.audience, 'EVENTFLOW_JWT_AUDIENCE'),
      });
      if (minted.warning) stderr.write(`${minted.warning}\n`);
      stdout.write(`${minted.token}\n`);
      return 0;
    } catch (error) {
      return fail(error);
    }
  }

  let client: EventflowClient | undefined;
  try {
    // Everything is checked before connecting, so bad input fails at once even without a gateway.
    const timeout = parseTimeout(values.timeout);
    const url = parseUrl(setting(values.url, 'EVENTFLOW_URL') ?? DEFAULT_URL);
    const token = setting(values.token, 'EVENTFLOW_TOKEN');
    // A refused handshake (a bad or expired token) ends the command at once: retrying cannot fix it.
    const refused = new AbortController();
    const run = prepare(name, args, values, stdout, stderr, io.signal, refused.signal);

    let lastConnectionError: unknown;
    let connected = false;
    // A command is one call: the first failed attempt (refused, unreachable) ends it, or --timeout does (late, below);
    // a gateway that answered but could not serve yet (gatewayBusy) is waited for within it.
    const unreachable = new AbortController();
    client = createNodeClient(url, {
      requestTimeout: timeout,
      handshakeTimeout: timeout,
      reconnect: { minDelay: 100, maxDelay: 1_000 },
      clientName: 'eventflow-cli',
      ...(token === undefined ? {} : { token }),
      onError: (error) => {
        if (error instanceof EventflowError && error.code === 'E_EVENTFLOW_CONNECTION_FAILED') {
          lastConnectionError = error;
          if (!gatewayBusy(error)) unreachable.abort();
          // Said once, on stderr: the command waits instead of ending, and a person should know for what.
          else if (!connected) stderr.write(`${connectionWait(error, timeout)}\n`);
        } else if (isRefusal(error)) refused.abort(error);
        else stderr.write(`${formatError(error)}\n`);
      },
    });
    // A timer of its own, not AbortSignal.timeout(): inside AbortSignal.any() that signal is held weakly, and a garbage
    // collection during the reconnects to a gateway whose store is down took it, so the command waited for good.
    const late = setTimeout(() => unreachable.abort(), timeout);
    try {
      await client.ready(AbortSignal.any([refused.signal, unreachable.signal]));
      connected = true;
    } catch (cause) {
      if (refused.signal.aborted) throw withTokenHint(refused.signal.reason, token);
      // A refused handshake rejects ready() with its own code (E_EVENTFLOW_UNAUTHORIZED): that is the message.
      if (isRefusal(cause)) throw withTokenHint(cause, token);
      if (cause instanceof EventflowError && cause.code !== 'E_EVENTFLOW_ABORTED') throw cause;
      throw new EventflowError('E_EVENTFLOW_CONNECTION_FAILED', `could not connect to ${url.href}: ${connectionFailure(lastConnectionError, url, timeout)}`, { cause });
    } finally {
      clearTimeout(late);
    }
    try {
      await run(client);
    } catch (error) {
      throw withTimeoutHint(withTokenHint(error, token), name, args, timeout, values.id);
    }
    if (refused.signal.aborted) throw withTokenHint(refused.signal.reason, token);
    return 0;
  } catch (error) {
    return fail(error);
  } finally {
    await client?.close();
  }
}

function parse(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    allowPositionals: true,
    strict: true,
    options: {
      url: { type: 'string' },
      id: { type: 'string' },
      rid: { type: 'string' },
      timeout: { type: 'string' },
      limit: { type: 'string' },
      offset: { type: 'string' },
      token: { type: 'string' },
      secret: { type: 'string' },
      sub: { type: 'string' },
      allow: { type: 'string', multiple: true },
      expires: { type: 'string' },
      issuer: { type: 'string' },
      audience: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
      version: { type: 'boolean', short: 'v' },
    },
  });
}

type Values = ReturnType<typeof parse>['values'];

/** @eventflow/node's version: package.json is one level above both src/ and dist/. */
function packageVersion(): string {
  return (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}

/** Validates a command's arguments and returns what runs it on a connected client. */
function prepare(
  name: string,
  args: string[],
  values: Values,
  stdout: CliWriter,
  stderr: CliWriter,
  signal: AbortSignal | undefined,
  refused: AbortSignal,
): (client: EventflowClient) => Promise<void> {
  const line = (value: unknown): void => void stdout.write(`${JSON.stringify(value)}\n`);
  switch (name) {
    case 'publish': {
      const [domain, eventName, pid, rawData] = args as [string, string, string, string | undefined];
      check(domain, 'domain');
      check(eventName, 'name');
      check(pid, 'pid');
      if (values.id !== undefined) check(values.id, 'id');
      if (values.rid !== undefined) check(values.rid, 'rid');
      const data = rawData === undefined ? undefined : parseData(rawData);
      // Chosen here, so that a timeout can name the id to publish again with (cli-hints.ts).
      values.id ??= generateEventId();
      const eventId = values.id;
      return async (client) => {
        const id = await client.publish({
          domain,
          name: eventName,
          pid,
          id: eventId,
          ...(data === undefined ? {} : { data }),
          ...(values.rid === undefined ? {} : { rid: values.rid }),
        });
        stdout.write(`${id}\n`);
      };
    }
    case 'tail': {
      const [domain, eventName = '*'] = args as [string, string | undefined];
      check(domain, 'domain');
      check(eventName, 'name');
      return async (client) => {
        const stop = signal ? { signal, dispose: () => undefined } : processSignal();
        try {
          const subscription = await client.subscribe(domain, eventName, (event: StoredEvent) => line(event));
          stderr.write(`tailing ${domain} › ${eventName}; press Ctrl-C to stop\n`);
          // The client reconnects and resumes by itself; the person watching is told it happened.
          const unwatch = client.onStateChange((state) => {
            if (state === 'offline') stderr.write('connection to the gateway lost; reconnecting (events routed meanwhile follow once it is back)\n');
            else if (state === 'open') stderr.write(`reconnected; tailing ${domain} › ${eventName} again\n`);
          });
          // A token that expires while tailing is refused at the reconnect: that ends the tail.
          await aborted(AbortSignal.any([stop.signal, refused]));
          unwatch();
          await subscription.unsubscribe().catch(() => undefined);
        } finally {
          stop.dispose();
        }
      };
    }
    case 'read': {
      const [domain, pid] = args as [string, string];
      check(domain, 'domain');
      check(pid, 'pid');
      return async (client) => {
        const events = await client.readEventlog(domain, pid);
        if (events.length === 0) throw noEvents(domain, pid);
        for (const event of events) line(event);
      };
    }
    case 'state': {
      const [domain, pid] = args as [string, string];
      check(domain, 'domain');
      check(pid, 'pid');
      return async (client) => {
        // readEventlogState's fold, with the eventlog at hand to tell "no events" from an empty state.
        const events = await client.readEventlog(domain, pid);
        line(client.composeEventlogState(events));
        if (events.length === 0) throw noEvents(domain, pid);
      };
    }
    default: {
      const spec: readonly string[] = Object.hasOwn(manageCommands, name) ? manageCommands[name as keyof typeof manageCommands].args : [];
      for (const [index, arg] of args.entries()) check(arg, spec[index] ?? 'argument');
      const page = { ...(values.limit === undefined ? {} : { limit: parseCount(values.limit, '--limit', 1, MAX_PAGE) }), ...(values.offset === undefined ? {} : { offset: parseCount(values.offset, '--offset') }) };
      const run = prepareManage(name, args, page, line, (text) => void stderr.write(text));
      if (!run) throw new EventflowError('E_EVENTFLOW_INVALID_INPUT', `unknown command ${JSON.stringify(name)}`);
      return run;
    }
  }
}

function parseCount(raw: string, what: string, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(value) || value < min || value > max) {
    throw new EventflowError('E_EVENTFLOW_INVALID_INPUT', `${what} must be a whole number${max < Number.MAX_SAFE_INTEGER ? ` from ${min} to ${max}` : ''}, got ${JSON.stringify(raw)}${max < Number.MAX_SAFE_INTEGER ? '; page on with --offset' : ''}`);
  }
  return value;
}

/**
 * stdout stays what scripts parse (nothing, or `{}`); the exit status says that nothing was there, as
 * for the other commands that find nothing: with exit 0 a mistyped pid read as a process without events.
 */
const noEvents = (domain: string, pid: string): NotFound =>
  new NotFound('E_EVENTFLOW_PROCESS_NOT_FOUND', `no events for ${domain} › ${pid}: the process has none (check the domain and pid, e.g. with "eventflow tail ${domain}")`);

function check(value: string, field: string): void {
  const parsed = identifier.safeParse(value);
  if (!parsed.success) throw new EventflowError('E_EVENTFLOW_INVALID_INPUT', describeIssues(parsed.error, field));
}

function parseData(raw: string): JsonObject {
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch (cause) {
    throw new EventflowError('E_EVENTFLOW_INVALID_INPUT', `json-data: not valid JSON (${cause instanceof Error ? cause.message : String(cause)}); pass an object such as '{"amount":3}'`, { cause });
  }
  const parsed = jsonObject.safeParse(json);
  if (!parsed.success) throw new EventflowError('E_EVENTFLOW_INVALID_INPUT', `json-data: must be a JSON object such as '{"amount":3}', got ${Array.isArray(json) ? 'an array' : json === null ? 'null' : typeof json}`);
  return parsed.data;
}

function parseUrl(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new EventflowError('E_EVENTFLOW_INVALID_INPUT', `url: ${JSON.stringify(raw)} is not a URL; pass one such as ${DEFAULT_URL}`);
  }
  if (url.protocol !== 'ws:' && url.protocol !== 'wss:') {
    throw new EventflowError('E_EVENTFLOW_INVALID_INPUT', `url: must start with ws:// or wss://, got ${JSON.stringify(raw)}`);
  }
  return url;
}

/** The longest a timer waits (Node runs a longer one at once): the client refused more, naming its own option. */
const MAX_TIMEOUT = 2 ** 31 - 1;

/** --timeout in decimal ms: Number() read "0x10" as 16 ms. */
function parseTimeout(raw: string | undefined): number {
  if (raw === undefined) return DEFAULT_TIMEOUT;
  const timeout = Number(raw);
  if (!/^\d+$/.test(raw) || timeout < 1 || timeout > MAX_TIMEOUT) {
    throw new EventflowError('E_EVENTFLOW_INVALID_INPUT', `timeout: must be a whole number of ms from 1 to ${MAX_TIMEOUT}, got ${JSON.stringify(raw)}`);
  }
  return timeout;
}

/** An AbortSignal aborted by SIGINT or SIGTERM, with a dispose that removes the listeners. */
function processSignal(): { signal: AbortSignal; dispose: () => void } {
  const controller = new AbortController();
  const onSignal = (): void => controller.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  return {
    signal: controller.signal,
    dispose: () => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  };
}

function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}

/** The gateway refused the handshake: retrying with the same token or client cannot succeed. */
const isRefusal = (error: unknown): error is EventflowError =>
  error instanceof EventflowError && (error.code === 'E_EVENTFLOW_UNAUTHORIZED' || error.code === 'E_EVENTFLOW_PROTOCOL_VERSION');

function formatError(error: unknown): string {
  if (error instanceof EventflowError || error instanceof NotFound) return `${error.code}: ${error.message}`;
  const code = (error as { code?: unknown } | null)?.code;
  const message = error instanceof Error ? error.message : String(error);
  // node:util parseArgs throws TypeErrors coded ERR_PARSE_ARGS_*: bad input, like ours.
  if (typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS')) return `E_EVENTFLOW_INVALID_INPUT: ${message}`;
  return `${typeof code === 'string' && isErrorCode(code) ? code : 'E_EVENTFLOW_INTERNAL'}: ${message}`;
}
