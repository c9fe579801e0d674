/**
 * The `iterating` feature (features.ts): `client.events()`, the async-iterator form of subscribe.
 * Node clients have it by default; a browser bundles it only when it passes `iterating` (browser
 * views take listeners and watches instead).
 */
import { assertNumber, assertSignal } from './arguments.js';
import { createAsyncQueue } from './async-queue.js';
import type { ClientFeature, FeatureHost, FeaturePart } from './features.js';
import type { NamespacePattern } from './namespace-pattern.js';
import type { StoredEvent } from './protocol.js';
import type { AnyListener } from './registrations.js';
import { assertRegistrable } from './validate.js';

type Target = string | NamespacePattern;

export interface Iterating extends FeaturePart {
  events(domain: Target, name: string | readonly string[], options?: { signal?: AbortSignal; pid?: string; bufferSize?: number }): AsyncIterableIterator<StoredEvent>;
}

function create(host: FeatureHost): Iterating {
  return {
    events(domain, name, options = {}) {
      if (typeof domain === 'object') domain.params(name, options.pid);
      else assertRegistrable(host.closed(), domain, name as string, 'name');
      assertNumber(options.bufferSize, 'options.bufferSize', true, 1);
      assertSignal(options.signal, 'options.signal');
      const { client } = host;
      const listener: AnyListener = (event) => queue.push(event);
      const { pid } = options;
      const queue = createAsyncQueue<StoredEvent>(() => void client.unsubscribe(domain, name, listener, { pid }).catch(host.onError), options.bufferSize, options.signal);
      client.subscribe(domain, name, listener, { pid }).catch((error: unknown) => queue.fail(error));
      return queue;
    },
  };
}

export const iterating: ClientFeature<'iterating', Iterating> = { name: 'iterating', create };
