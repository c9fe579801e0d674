import { StrictMode, type ReactNode } from 'react';
import { createRoot, type Root } from 'react-dom/client';
import { expect, it, onTestFinished } from 'vitest';
import { commands } from 'vitest/browser';
import { namespacePattern } from '@eventflow/core';
import { EventflowProvider, useConnectionState, useEventlogState, useSubscription } from '../src/react.js';
import type { BrowserClient } from '../src/index.js';
import { browserClient, cacheName, gateway, otherClient } from './helpers.js';

function mount(client: BrowserClient, children: ReactNode): { root: Root; element: HTMLElement; text(): string } {
  const element = document.createElement('div');
  document.body.append(element);
  const root = createRoot(element);
  root.render(
    <StrictMode>
      <EventflowProvider client={client}>{children}</EventflowProvider>
    </StrictMode>,
  );
  onTestFinished(() => {
    root.unmount();
    element.remove();
  });
  return { root, element, text: () => element.textContent ?? '' };
}

function Process({ pid }: { pid: string }): ReactNode {
  const { state, stale, loading, error } = useEventlogState('orders', pid);
  if (error) return <p>error</p>;
  return <p>{loading ? 'loading' : `${JSON.stringify(state)}${stale ? ' (stale)' : ''}`}</p>;
}

function Feed({ limit }: { limit?: number }): ReactNode {
  const events = useSubscription('orders', '*', limit === undefined ? {} : { limit });
  return <ul>{events.map((event) => <li key={event.id}>{event.name}</li>)}</ul>;
}

function History({ last }: { last: number }): ReactNode {
  const events = useSubscription('orders', '*', { last });
  return <ul>{events.map((event) => <li key={event.id}>{` ${event.pid}`}</li>)}</ul>;
}

function PatternFeed(): ReactNode {
  // A new pattern value on every render: the hook depends on its text.
  const events = useSubscription(namespacePattern('shop.*'), ['placed', 'paid'], { pid: 'o*' });
  return <ul>{events.map((event) => <li key={event.id}>{`${event.domain}:${event.name}`}</li>)}</ul>;
}

function Connection(): ReactNode {
  return <span>{useConnectionState()}</span>;
}

it('keeps exactly one gateway subscription through StrictMode and mount → unmount → mount', async () => {
  const { url, handle } = await gateway();
  const client = browserClient(url, cacheName());
  const other = otherClient(url);
  await other.publish({ domain: 'orders', name: 'placed', pid: 'o1', data: { total: 1 } });
  const stats = async (): Promise<number> => (await commands.gatewayStats(handle)).subscriptions;

  const view = mount(client, <><Process pid="o1" /><Process pid="o1" /><Process pid="o2" /><Feed /></>);
  await expect.poll(view.text).toBe('{"total":1}{"total":1}{}');
  expect(await stats()).toBe(1); // one `*` subscription for the domain, shared by watches and the feed

  view.root.unmount();
  await expect.poll(stats).toBe(0);

  const again = mount(client, <><Process pid="o1" /><Feed /></>);
  await expect.poll(again.text).toBe('{"total":1}');
  await expect.poll(stats).toBe(1);
  // Kept for now: a late second subscribe would come from React's effects, not from a stream a
  // marker could follow.
  await new Promise((resolve) => setTimeout(resolve, 100));
  expect(await stats()).toBe(1);

  // Still live, and each event reaches the view once.
  await other.publish({ domain: 'orders', name: 'paid', pid: 'o1', data: { paid: true } });
  await expect.poll(again.text).toBe('{"total":1,"paid":true}paid');
  again.root.unmount();
  await expect.poll(stats).toBe(0);
});

it('renders the state and the latest events live, and follows the connection state', async () => {
  const { url, handle } = await gateway();
  const client = browserClient(url, cacheName());
  const other = otherClient(url);
  const view = mount(client, <><Connection /><Process pid="o1" /><Feed limit={2} /></>);
  await expect.poll(view.text).toBe('open{}');

  await other.publish({ domain: 'orders', name: 'placed', pid: 'o1', data: { items: ['a'] } });
  await other.publish({ domain: 'orders', name: 'added', pid: 'o1', data: { items: ['b'] } });
  await other.publish({ domain: 'orders', name: 'shipped', pid: 'o2', data: {} });
  await expect.poll(view.text).toBe('open{"items":["a","b"]}addedshipped');

  await commands.gatewayStop(handle);
  await expect.poll(view.text).toBe('offline{"items":["a","b"]} (stale)addedshipped');
  await commands.gatewayRestart(handle);
  await expect.poll(view.text, { timeout: 5000 }).toBe('open{"items":["a","b"]}addedshipped');
});

it('gives useSubscription its history also when the domain is already watched (one shared gateway subscription)', async () => {
  const { url, handle } = await gateway();
  const client = browserClient(url, cacheName());
  const other = otherClient(url);
  for (let i = 0; i < 7; i++) await other.publish({ domain: 'orders', name: 'placed', pid: `h${i}`, data: { n: i } });
  const stats = async (): Promise<number> => (await commands.gatewayStats(handle)).subscriptions;
  const watched = mount(client, <Process pid="h6" />);
  await expect.poll(watched.text).toBe('{"n":6}');
  await expect.poll(stats).toBe(1);

  // Next to the watch of the same domain: its own last 5, then live, each once.
  const feed = mount(client, <History last={5} />);
  await expect.poll(feed.text).toBe(' h2 h3 h4 h5 h6');
  await other.publish({ domain: 'orders', name: 'paid', pid: 'h6', data: { paid: true } });
  await expect.poll(feed.text).toBe(' h2 h3 h4 h5 h6 h6');
  await expect.poll(watched.text).toBe('{"n":6,"paid":true}');
  expect(await stats()).toBe(1);
});

it('follows a namespace pattern with name and pid filters, one gateway subscription through StrictMode', async () => {
  const { url, handle } = await gateway();
  const client = browserClient(url, cacheName());
  const other = otherClient(url);
  const stats = async (): Promise<number> => (await commands.gatewayStats(handle)).subscriptions;
  const view = mount(client, <><PatternFeed /><PatternFeed /></>);
  await expect.poll(stats).toBe(1);
  await other.publish({ domain: 'shop.eu', name: 'placed', pid: 'o1' });
  await other.publish({ domain: 'shop.eu', name: 'cancelled', pid: 'o1' }); // name filtered out
  await other.publish({ domain: 'shop.us', name: 'paid', pid: 'x1' }); // pid filtered out
  await other.publish({ domain: 'stage.us', name: 'paid', pid: 'o3' }); // domain not matched
  await other.publish({ domain: 'shop.new', name: 'paid', pid: 'o2' }); // a domain created after subscribing
  await expect.poll(view.text).toBe('shop.eu:placedshop.new:paid'.repeat(2));
  view.root.unmount();
  await expect.poll(stats).toBe(0);
});
