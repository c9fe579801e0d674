/**
 * The CLI against a gateway with EVENTFLOW_AUTH=jwt: `eventflow token` mints what the gateway
 * accepts (its own verification, not a re-implementation), `--token` / EVENTFLOW_TOKEN carry it, and
 * a missing, forged or too narrow token fails at once with the gateway's code and what to do.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliErrorCodes, isErrorCode, listDomains } from '@eventflow/core';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { eventually, sleep } from '@eventflow/test-support/wait';
import { runCli, usage, type CliIo } from '../src/commands.js';
import { tokenActions } from '../src/token.js';

const SECRET = 'cli-token-secret-0123456789-abcdefghijklmnopqrstuvwxyz';
const ISSUER = 'https://id.example.test';
const AUDIENCE = 'eventflow-tests';

let h: Harness;
beforeAll(async () => (h = await startHarness({ EVENTFLOW_AUTH: 'jwt', EVENTFLOW_JWT_SECRET: SECRET, EVENTFLOW_JWT_ISSUER: ISSUER, EVENTFLOW_JWT_AUDIENCE: AUDIENCE })));
afterAll(async () => h.stop());

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function cli(argv: string[], env: Record<string, string> = {}): Promise<Run> {
  const out = { stdout: '', stderr: '' };
  const io: CliIo = {
    stdout: { write: (chunk: string) => (out.stdout += chunk) },
    stderr: { write: (chunk: string) => (out.stderr += chunk) },
    env: { EVENTFLOW_URL: h.gateway.url, ...env },
  };
  const code = await runCli(argv, io);
  return { code, ...out };
}

/** A token from the CLI, as a person gets it: the secret and issuer/audience from the gateway's variables. */
async function mint(...allow: string[]): Promise<string> {
  const run = await cli(['token', '--sub', 'ops', ...allow.flatMap((grant) => ['--allow', grant])], { EVENTFLOW_JWT_SECRET: SECRET, EVENTFLOW_JWT_ISSUER: ISSUER, EVENTFLOW_JWT_AUDIENCE: AUDIENCE });
  expect(run).toMatchObject({ code: 0, stderr: '' });
  return run.stdout.trim();
}

const payload = (token: string): Record<string, unknown> => JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString()) as Record<string, unknown>;

describe('eventflow token', () => {
  it('signs the documented claims with an expiry (1 h by default) that the gateway accepts, via --token and via EVENTFLOW_TOKEN', async () => {
    const token = await mint('orders:publish,read', 'billing-*:read');
    expect(payload(token)).toEqual({
      sub: 'ops',
      iat: expect.any(Number),
      exp: (payload(token).iat as number) + 3600,
      iss: ISSUER,
      aud: AUDIENCE,
      eventflow: { publish: ['orders'], read: ['orders', 'billing-*'] },
    });
    const published = await cli(['publish', '--token', token, 'orders', 'placed', 'o1', '{"amount":3}']);
    expect(published).toMatchObject({ code: 0, stderr: '' });
    expect(await cli(['state', 'orders', 'o1'], { EVENTFLOW_TOKEN: token })).toEqual({ code: 0, stdout: '{"amount":3}\n', stderr: '' });
  });

  it("knows every action the gateway does: '*' grants all of them", async () => {
    const client = h.client({ token: await mint('orders:*') });
    const { actions } = await listDomains(client);
    expect(actions).toEqual([...tokenActions]);
  });

  it('--expires sets the lifetime, and says when the gateway will cut it shorter', async () => {
    const env = { EVENTFLOW_JWT_SECRET: SECRET };
    const short = await cli(['token', '--sub', 'ci', '--allow', '*:read', '--expires', '15m'], env);
    expect(short.code).toBe(0);
    const claims = payload(short.stdout.trim());
    expect((claims.exp as number) - (claims.iat as number)).toBe(900);
    const long = await cli(['token', '--sub', 'ci', '--allow', '*:read', '--expires', '7d'], env);
    expect(long.code).toBe(0);
    expect(long.stderr).toMatch(/^note: the token's rights end after EVENTFLOW_JWT_MAX_LIFETIME_S on the gateway/);
  });

  it.each([
    [['token', '--sub', 'x', '--allow', '*:read'], {}, /^E_EVENTFLOW_INVALID_INPUT: secret: must be the gateway's EVENTFLOW_JWT_SECRET, which has at least 32 characters \(got 0\); pass it with --secret or EVENTFLOW_JWT_SECRET/],
    [['token', '--secret', 'short', '--sub', 'x', '--allow', '*:read'], {}, /^E_EVENTFLOW_INVALID_INPUT: secret: .*\(got 5\)/],
    [['token', '--allow', '*:read'], { EVENTFLOW_JWT_SECRET: SECRET }, /^E_EVENTFLOW_INVALID_INPUT: --sub: must name who the token is for/],
    [['token', '--sub', 'x'], { EVENTFLOW_JWT_SECRET: SECRET }, /^E_EVENTFLOW_INVALID_INPUT: --allow: give at least one grant/],
    [['token', '--sub', 'x', '--allow', 'orders'], { EVENTFLOW_JWT_SECRET: SECRET }, /^E_EVENTFLOW_INVALID_INPUT: --allow "orders": expected <domain-pattern>:<action>/],
    [['token', '--sub', 'x', '--allow', 'orders:publsh'], { EVENTFLOW_JWT_SECRET: SECRET }, /^E_EVENTFLOW_INVALID_INPUT: --allow "orders:publsh": unknown action "publsh"; the actions are read, subscribe, publish/],
    [['token', '--sub', 'x', '--allow', '*:read', '--expires', 'never'], { EVENTFLOW_JWT_SECRET: SECRET }, /^E_EVENTFLOW_INVALID_INPUT: --expires: expected a duration such as 90s, 15m, 1h or 7d .*tokens must expire/],
    [['token', '--sub', 'x', '--allow', `${'a'.repeat(257)}:consume`], { EVENTFLOW_JWT_SECRET: SECRET }, /^E_EVENTFLOW_INVALID_INPUT: --allow: the domain pattern "a{32}"… has 257 characters; the gateway accepts at most 256/],
    [
      ['token', '--sub', 'x', ...Array.from({ length: 300 }, (_, i) => ['--allow', `tenant-${i}:consume,read`]).flat()],
      { EVENTFLOW_JWT_SECRET: SECRET },
      /^E_EVENTFLOW_INVALID_INPUT: --allow: these grants make a token of \d+ characters; the gateway accepts at most 8192: give fewer or shorter grants/,
    ],
  ])('refuses %j with a message saying what to pass (exit 1, nothing on stdout)', async (argv, env, message) => {
    const run = await cli(argv, env);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(message);
  });
});

describe('the CLI on a gateway with EVENTFLOW_AUTH=jwt', () => {
  it('without a token: E_EVENTFLOW_UNAUTHORIZED on the first line, saying to pass --token or EVENTFLOW_TOKEN', async () => {
    const run = await cli(['state', 'orders', 'o1']);
    expect(run.code).toBe(1);
    expect(run.stderr.split('\n')[0]).toMatch(/^E_EVENTFLOW_UNAUTHORIZED: .*the gateway needs a token: pass --token or set EVENTFLOW_TOKEN \("eventflow token" mints one/);
  });

  it('a forged token fails at once (not after the connect timeout) with the refusal', async () => {
    const forged = (await cli(['token', '--sub', 'ops', '--allow', '*:*'], { EVENTFLOW_JWT_SECRET: 'another-secret-0123456789-abcdefghijklmnop' })).stdout.trim();
    // A timeout longer than the test's own: only a refusal that ends the wait lets this pass.
    const run = await cli(['state', '--timeout', '600000', 'orders', 'o1'], { EVENTFLOW_TOKEN: forged });
    expect(run.code).toBe(1);
    expect(run.stderr.split('\n')[0]).toMatch(/^E_EVENTFLOW_UNAUTHORIZED: .*the token from --token or EVENTFLOW_TOKEN was refused/);
  });

  it('tail ends, exit 1, when its token runs out: the reconnect is refused, and retrying cannot help', async () => {
    // Rights end after EVENTFLOW_JWT_MAX_LIFETIME_S (2 s here) from the token's `iat`: the gateway closes with 4401, the same token is refused at the reconnect.
    const short = await startHarness({ EVENTFLOW_AUTH: 'jwt', EVENTFLOW_JWT_SECRET: SECRET, EVENTFLOW_JWT_MAX_LIFETIME_S: 2 });
    try {
      // `iat` is in whole seconds: minted late in a second, with 1 s the rights had run out before tail connected (CI, once).
      // Minted at the start of one, they last the whole 2 s.
      await sleep(1_000 - (Date.now() % 1_000) + 10);
      const token = (await cli(['token', '--sub', 'ops', '--allow', 'orders:subscribe'], { EVENTFLOW_JWT_SECRET: SECRET })).stdout.trim();
      const out = { stdout: '', stderr: '' };
      const code = await runCli(['tail', 'orders', '--url', short.gateway.url, '--token', token], {
        stdout: { write: (chunk: string) => (out.stdout += chunk) },
        stderr: { write: (chunk: string) => (out.stderr += chunk) },
        env: {},
        signal: new AbortController().signal, // never aborted: only the refusal ends it
      });
      expect(code).toBe(1);
      expect(out.stderr).toMatch(/^tailing orders › \*/);
      expect(out.stderr.trim().split('\n').at(-1)).toMatch(/^E_EVENTFLOW_UNAUTHORIZED: .*the token from --token or EVENTFLOW_TOKEN was refused/);
    } finally {
      await short.stop();
    }
  });

  it('a token without the right names the grant to ask for', async () => {
    const run = await cli(['publish', 'orders', 'placed', 'o2'], { EVENTFLOW_TOKEN: await mint('orders:read') });
    expect(run.code).toBe(1);
    expect(run.stderr.split('\n')[0]).toMatch(/^E_EVENTFLOW_FORBIDDEN: .*e\.g\. --allow 'orders:publish'\)$/);
  });

  it("the usage's first-token example grants what the operator's commands need: groups and dead-letters list, requeue acts", async () => {
    const grants = /--allow '([^']+)'\)/.exec(usage)?.[1];
    expect(grants).toBeDefined();
    const env = { EVENTFLOW_TOKEN: await mint(grants!) };
    const worker = h.client({ token: await mint('jobs:consume,publish') });
    await worker.consume('jobs', 'send', (_event, context) => context.retry(0, new Error('mail server down')), { group: 'mail', retry: { attempts: 1 } });
    const id = await worker.publish({ domain: 'jobs', name: 'send', pid: 'm1' });
    await eventually(async () => (await cli(['dead-letters', 'jobs'], env)).stdout.includes(id), 5_000, 'the dead letter listed with the example token');
    const groups = await cli(['groups', 'jobs'], env);
    expect(groups).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(groups.stdout.split('\n')[0]!)).toMatchObject({ domain: 'jobs', name: 'send', group: 'mail', deadLetters: 1 });
    expect(await cli(['dead-letter-discard', id, 'jobs', 'send', 'mail'], env)).toMatchObject({ code: 0, stdout: '{"discarded":true}\n' });
  });

  it('an empty list of groups or dead letters says on stderr that it holds only what the token may consume; stdout stays empty, exit 0', async () => {
    const env = { EVENTFLOW_TOKEN: await mint('jobs:consume') };
    const groups = await cli(['groups', 'payroll'], env);
    expect(groups).toEqual({ code: 0, stdout: '', stderr: 'no consumer groups in payroll (the gateway lists those of the domains the token may consume only)\n' });
    const letters = await cli(['dead-letters'], env);
    expect(letters).toMatchObject({ code: 0, stdout: '' });
    expect(letters.stderr).toBe('no dead letters (the gateway lists those of the domains the token may consume only)\n');
  });

  // Before: the same lines without a code ("no dead letter …"), which a script could branch on only by their text.
  it('requeueing or discarding an unknown dead letter, or deleting an unknown group, prints false and exits 1 with a stable code, what was not found and what to run', async () => {
    const token = await mint('jobs:consume,manage');
    const requeue = await cli(['dead-letter-requeue', 'no-such-event', 'jobs', 'run'], { EVENTFLOW_TOKEN: token });
    expect(requeue).toEqual({
      code: 1,
      stdout: '{"requeued":false}\n',
      stderr: 'E_EVENTFLOW_DEAD_LETTER_NOT_FOUND: no dead letter "no-such-event" in jobs › run (the default group) (none ever, or requeued or discarded already), so nothing was requeued; "eventflow dead-letters jobs" lists them (<name> is the consumed name: the event name, or * for a group of every name)\n',
    });
    const discard = await cli(['dead-letter-discard', 'no-such-event', 'jobs', 'run', 'billing'], { EVENTFLOW_TOKEN: token });
    expect(discard).toMatchObject({ code: 1, stdout: '{"discarded":false}\n' });
    expect(discard.stderr).toMatch(/^E_EVENTFLOW_DEAD_LETTER_NOT_FOUND: no dead letter "no-such-event" in jobs › run \(group "billing"\) .*, so nothing was discarded; "eventflow dead-letters jobs" lists them/);
    const deleted = await cli(['group-delete', 'jobs', 'run', 'nobody'], { EVENTFLOW_TOKEN: token });
    expect(deleted).toEqual({
      code: 1,
      stdout: '{"deleted":false}\n',
      stderr: 'E_EVENTFLOW_GROUP_NOT_FOUND: no consumer group jobs › run (group "nobody"), so nothing was deleted; "eventflow groups jobs" lists them (<name> is the consumed name: the event name, or * for a group of every name)\n',
    });
    // Each code is in the catalog with what to do, and none is a client ErrorCode (the browser bundles carry none).
    for (const code of ['E_EVENTFLOW_DEAD_LETTER_NOT_FOUND', 'E_EVENTFLOW_GROUP_NOT_FOUND', 'E_EVENTFLOW_PROCESS_NOT_FOUND']) {
      expect(cliErrorCodes, code).toHaveProperty(code);
      expect(isErrorCode(code), code).toBe(false);
    }
  });
});
