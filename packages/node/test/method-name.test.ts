import { describe, expect, it } from 'vitest';
import { EventflowError, methodNameFor } from '../src/index.js';

describe('methodNameFor', () => {
  it.each([
    ['user-created', 'onUserCreated'],
    ['order.placed.v2', 'onOrderPlacedV2'],
    ['a--b', 'onAB'],
    ['2fa enabled', 'on2faEnabled'],
    ['user_created', 'onUser_created'],
    ['UserCreated', 'onUsercreated'],
    ['success', 'onSuccess'],
  ])('maps %j to %s as v4 does (§8.13)', (name, method) => {
    expect(methodNameFor(name)).toBe(method);
  });

  it('keeps v4 results for other mappable names', () => {
    expect(methodNameFor('a')).toBe('onA');
    expect(methodNameFor('_private')).toBe('on_private');
    expect(methodNameFor('ORDER:Placed/now')).toBe('onOrderPlacedNow');
    expect(methodNameFor('a b  c')).toBe('onABC');
  });

  it.each([
    ['-foo', /starts with "-"/],
    ['foo-', /ends with "-"/],
    ['', /empty/],
    ['ordér', /non-ASCII character "é"/],
    ['a..', /ends with "\."/],
    ['*', /starts with "\*"/],
    [' x', /starts with " "/],
  ])('refuses %j with E_EVENTFLOW_CONSUMER_NAME_UNMAPPABLE', (name, reason) => {
    let error: unknown;
    try {
      methodNameFor(name);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(EventflowError);
    expect((error as EventflowError).code).toBe('E_EVENTFLOW_CONSUMER_NAME_UNMAPPABLE');
    const message = (error as EventflowError).message;
    expect(message).toContain(JSON.stringify(name)); // which name
    expect(message).toMatch(reason); // why
    expect(message).toMatch(/Rename the event|client\.consume/); // what to do
    expect((error as EventflowError).details).toMatchObject({ name });
  });
});
