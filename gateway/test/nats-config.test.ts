/**
 * The NATS router's subjects and settings, without a NATS server: the token escape of v4 domains
 * and names, the options passed to nats.js, and the configurations that are refused.
 */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../src/config.js';
import { escapeToken, isPositionPayload, Subjects, unescapeToken } from '../src/router/nats/subjects.js';
import { natsConnectionOptions } from '../src/router/nats/join.js';
import { Coalescer } from '../src/router/coalesce.js';

/** A valid NATS subject token: no `.`, no whitespace, not a wildcard, not empty. */
const validToken = (token: string): boolean => token.length > 0 && !/[.\s*>]/.test(token);

describe('NATS subjects', () => {
  it.each(['orders', 'orders.eu', '*', '>', 'a b', 'x_y', '_2E', 'prod.*.>', '!"#$%&\'()+,/:;<=>?@[\\]^`{|}~', 'é', '-'])('%j becomes one valid token and back', (value) => {
    const token = escapeToken(value);
    expect(validToken(token), token).toBe(true);
    expect(unescapeToken(token)).toBe(value);
  });

  it('keeps plain names readable and never maps two values to one token', () => {
    expect(escapeToken('order-placed42')).toBe('order-placed42');
    expect(escapeToken('order.placed')).toBe('order_2Eplaced');
    const values = ['a.b', 'a_2Eb', 'a_b', 'a b', 'a*b', 'a>b', 'ab'];
    expect(new Set(values.map(escapeToken)).size).toBe(values.length);
  });

  it("subscribes to every name of a domain with `*`, and to an event literally named '*' apart", () => {
    const subjects = new Subjects('eventflow.prod');
    expect(subjects.interest('orders', '*')).toBe('eventflow.prod.event.orders.*');
    expect(subjects.event('orders', '*')).toBe('eventflow.prod.event.orders._2A');
    expect(subjects.event('a.b', 'c d')).toBe('eventflow.prod.event.a_2Eb.c_20d');
  });

  it('reads the domain back from an event subject (pattern subscriptions hear of every domain), and nothing from another subject', () => {
    const subjects = new Subjects('eventflow.prod');
    expect(subjects.anyEvent).toBe('eventflow.prod.event.*.*');
    for (const domain of ['orders', 'shop.eu', 'a b *>', '_x_', 'ü']) expect(subjects.domainOf(subjects.event(domain, 'placed'))).toBe(domain);
    expect(subjects.domainOf('eventflow.prod.resync')).toBeUndefined();
    expect(subjects.domainOf('other.event.orders.placed')).toBeUndefined();
    // Not what escapeToken makes: a stray `_` or a lowercase escape.
    expect(subjects.domainOf('eventflow.prod.event.a_2.placed')).toBeUndefined();
    expect(subjects.domainOf('eventflow.prod.event.a_2e.placed')).toBeUndefined();
  });
});

describe('what arrives over NATS', () => {
  it('takes only the payloads gateways send: a position on event subjects', () => {
    const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);
    for (const good of ['1', '42', '9007199254740991']) expect(isPositionPayload(bytes(good)), good).toBe(true);
    for (const bad of ['', '0', '007', '-1', '1.5', '1e9', ' 1', 'abc', '9007199254740993', '12345678901234567']) expect(isPositionPayload(bytes(bad)), bad).toBe(false);
  });

  it('coalesces the work asked for per key: any burst while a run is in flight is one more run', async () => {
    const runs: string[] = [];
    const finish = new Map<string, () => void>();
    const coalescer = new Coalescer(() => undefined);
    const work = (key: string) => () => {
      runs.push(key);
      return new Promise<void>((resolve) => finish.set(key, resolve));
    };
    const settled = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
    coalescer.ask('a', work('a'));
    for (let i = 0; i < 10_000; i++) coalescer.ask('a', work('a'));
    coalescer.ask('b', work('b'));
    expect(runs).toEqual(['a', 'b']);
    finish.get('a')?.();
    await settled();
    expect(runs).toEqual(['a', 'b', 'a']);
    finish.get('a')?.();
    finish.get('b')?.();
    await settled();
    // Nothing was asked for during the second run of 'a' nor the run of 'b'.
    expect(runs).toEqual(['a', 'b', 'a']);
    coalescer.ask('a', work('a'));
    expect(runs).toEqual(['a', 'b', 'a', 'a']);
    expect(coalescer.runs).toBe(4);
  });
});

describe('NATS settings', () => {
  const mysql = { EVENTFLOW_STORE: 'mysql', EVENTFLOW_ROUTER: 'nats' };

  it('EVENTFLOW_ROUTER=nats needs the MySQL store', () => {
    expect(() => parseConfig({ EVENTFLOW_ROUTER: 'nats' })).toThrow(expect.objectContaining({ code: 'E_EVENTFLOW_CONFIG', message: expect.stringContaining('EVENTFLOW_ROUTER=nats needs EVENTFLOW_STORE=mysql') }));
    expect(parseConfig(mysql).EVENTFLOW_ROUTER).toBe('nats');
  });

  it.each([
    [{ EVENTFLOW_NATS_SERVERS: 'http://nats:4222' }, 'EVENTFLOW_NATS_SERVERS'],
    [{ EVENTFLOW_NATS_SUBJECT_PREFIX: 'a..b' }, 'EVENTFLOW_NATS_SUBJECT_PREFIX'],
    [{ EVENTFLOW_NATS_SUBJECT_PREFIX: 'a.>' }, 'EVENTFLOW_NATS_SUBJECT_PREFIX'],
    [{ EVENTFLOW_NATS_USER: 'u' }, 'EVENTFLOW_NATS_USER and EVENTFLOW_NATS_PASSWORD go together'],
    [{ EVENTFLOW_NATS_TOKEN: 't', EVENTFLOW_NATS_CREDS_FILE: '/x.creds' }, 'at most one of'],
    [{ EVENTFLOW_NATS_TLS_CERT_FILE: '/c.pem' }, 'EVENTFLOW_NATS_TLS_KEY_FILE'],
  ])('refuses %j', (values, message) => {
    expect(() => parseConfig({ ...mysql, ...values })).toThrow(expect.objectContaining({ code: 'E_EVENTFLOW_CONFIG', message: expect.stringContaining(message) }));
  });

  it('never shows the token or password in the error', () => {
    const error = (() => {
      try {
        parseConfig({ ...mysql, EVENTFLOW_NATS_TOKEN: 'sekrit-token', EVENTFLOW_NATS_USER: 'u', EVENTFLOW_NATS_PASSWORD: 'sekrit-pass' });
      } catch (caught) {
        return caught as Error;
      }
      return undefined;
    })();
    expect(error?.message).toContain('at most one of');
    expect(error?.message).not.toMatch(/sekrit/);
  });

  it('a credentials or TLS file that cannot be read fails the start naming its variable', () => {
    for (const variable of ['EVENTFLOW_NATS_CREDS_FILE', 'EVENTFLOW_NATS_TLS_CA_FILE']) {
      const config = parseConfig({ ...mysql, [variable]: '/nonexistent/eventflow.pem' });
      expect(() => natsConnectionOptions(config, 'G1')).toThrow(expect.objectContaining({ code: 'E_EVENTFLOW_CONFIG', message: expect.stringContaining(`${variable}: cannot read /nonexistent/eventflow.pem (ENOENT)`) }));
    }
  });

  it('passes servers, authentication and TLS through to nats.js, reconnecting forever', () => {
    const ca = fileURLToPath(import.meta.url);
    const config = parseConfig({
      ...mysql,
      EVENTFLOW_NATS_SERVERS: 'nats://a:4222, tls://b:4443',
      EVENTFLOW_NATS_USER: 'gateway',
      EVENTFLOW_NATS_PASSWORD: 'pw',
      EVENTFLOW_NATS_TLS_CA_FILE: ca,
    });
    expect(natsConnectionOptions(config, 'G1')).toMatchObject({
      servers: ['nats://a:4222', 'tls://b:4443'],
      name: 'G1',
      noEcho: true,
      maxReconnectAttempts: -1,
      // A silent link is found within seconds, not nats.js's default minutes.
      pingInterval: 1_000,
      maxPingOut: 2,
      user: 'gateway',
      pass: 'pw',
      tls: { caFile: ca },
    });
    expect(natsConnectionOptions(parseConfig({ ...mysql, EVENTFLOW_NATS_TOKEN: 't' }), 'G1')).toMatchObject({ servers: ['nats://127.0.0.1:4222'], token: 't' });
    expect(natsConnectionOptions(parseConfig(mysql), 'G1')).not.toHaveProperty('tls');
  });
});
