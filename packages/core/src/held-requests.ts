/**
 * Which of a client's consumers has no room for an event: request() (waits.ts) asks when its wait times out, so that a
 * handler that awaited request() of an event its own consumer takes hears why nothing came (it waited for itself: the
 * gateway sends that consumer nothing while its `concurrency` slots are all running, nor, `ordered`, an event of a pid
 * whose handler runs). Consumers (consumers.ts) enter theirs here; kept apart so that a client that only waits bundles
 * no consumer code.
 */

/** A consumer as request() asks it. */
export interface SlotsView {
  readonly domain: string;
  readonly name: string;
  readonly concurrency: number;
  readonly ordered: boolean;
  /** True when a delivery of an event of `pid` could not start now. */
  holds(pid: string): boolean;
}

/** Each client's consumers, by the client's FeatureHost (one per client, shared by its features). */
const byHost = new WeakMap<object, Set<SlotsView>>();

/** Enters a consumer; returns the function that takes it out again (removed, or ended by the gateway). */
export function enterSlots(host: object, view: SlotsView): () => void {
  let views = byHost.get(host);
  if (!views) byHost.set(host, (views = new Set()));
  views.add(view);
  return () => void views.delete(view);
}

/** The consumer of `host` that takes (domain, name) and has no room for an event of `pid` now, if any. */
export function heldBy(host: object, domain: string, name: string, pid: string): SlotsView | undefined {
  for (const view of byHost.get(host) ?? []) {
    if (view.domain === domain && (view.name === name || view.name === '*') && view.holds(pid)) return view;
  }
  return undefined;
}
