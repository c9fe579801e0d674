import { commands } from 'vitest/browser';
import { expect, it } from 'vitest';
import { createClient } from '@eventflow/core';

it('runs in Chromium against a real gateway', async () => {
  const { handle, url } = await commands.gatewayStart();
  const client = createClient(url);
  try {
    const seen: string[] = [];
    await client.subscribe('d', '*', (event) => seen.push(event.name));
    await client.publish({ domain: 'd', name: 'hello', pid: 'p' });
    await expect.poll(() => seen).toEqual(['hello']);
    expect(typeof indexedDB.open).toBe('function');
    expect(navigator.userAgent).toContain('Chrome');
  } finally {
    await client.close();
    await commands.gatewayDispose(handle);
  }
});
