import { describe, expect, it } from 'vitest';
import { errorFromFrame } from '../src/requests.js';

describe('errorFromFrame', () => {
  it('keeps a listed code', () => {
    const error = errorFromFrame({ type: 'error', code: 'E_EVENTFLOW_FORBIDDEN', message: 'no', details: { domain: 'a' } });
    expect([error.code, error.message, error.details]).toEqual(['E_EVENTFLOW_FORBIDDEN', 'no', { domain: 'a' }]);
  });

  it('passes through a code a newer gateway knows and this client does not list', () => {
    const error = errorFromFrame({ type: 'error', code: 'E_EVENTFLOW_SOMETHING_NEW', message: 'new' });
    expect(error.code).toBe('E_EVENTFLOW_SOMETHING_NEW');
  });

  it('turns anything that is not an eventflow code into E_EVENTFLOW_INTERNAL, keeping it in details', () => {
    for (const code of ['EACCES', 'E_EVENTFLOW_', 'e_eventflow_forbidden', 'E_EVENTFLOW_X Y']) {
      const error = errorFromFrame({ type: 'error', code, message: 'odd' });
      expect([error.code, error.details?.code]).toEqual(['E_EVENTFLOW_INTERNAL', code]);
    }
  });
});
