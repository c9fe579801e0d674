/**
 * A process's timeline as the Process view holds it: read from the gateway in pages (the first
 * small, for a fast first paint; the rest in the background), brought up to date when the live
 * state moves past it, and, when the gateway cannot answer, the eventlog the browser cache holds
 * (without fates), marked stale.
 */
import { useEffect, useRef, useState } from 'react';
import type { BrowserClient } from '@eventflow/browser';
import type { EventFate, StoredEvent } from '@eventflow/core';
import { readTimeline } from '@eventflow/core';

export const FIRST_PAGE = 300;
const NEXT_PAGES = 5_000;

export interface Timeline {
  events: StoredEvent[];
  fates: Map<string, EventFate>;
  count: number;
  children: Array<{ eventId: string; domain: string; cpid: string }>;
  entities: Array<{ eventId: string; eid: string }>;
  /** Every page is loaded. */
  complete: boolean;
  stale: boolean;
  error: unknown;
}

const empty = (): Timeline => ({ events: [], fates: new Map(), count: 0, children: [], entities: [], complete: false, stale: false, error: undefined });

/** The timeline of (domain, pid), read again after `position` whenever the live position passes what it holds. */
export function useTimeline(client: BrowserClient, domain: string, pid: string, livePosition: number): Timeline {
  const [timeline, setTimeline] = useState<Timeline>(empty);
  const loading = useRef<Promise<void> | undefined>(undefined);
  const newest = useRef(0);

  useEffect(() => {
    let cancelled = false;
    newest.current = 0;
    setTimeline(empty());
    const load = async (): Promise<void> => {
      try {
        let page = await readTimeline(client, domain, pid, { limit: FIRST_PAGE });
        if (cancelled) return;
        const add = (events: StoredEvent[], fates: EventFate[], complete: boolean): void => {
          newest.current = events.at(-1)?.position ?? newest.current;
          setTimeline((current) => {
            const map = new Map(current.fates);
            for (const fate of fates) map.set(fate.eventId, fate);
            return { ...current, events: [...current.events, ...events], fates: map, complete, stale: false, error: undefined };
          });
        };
        setTimeline((current) => ({ ...current, count: page.count, children: page.children, entities: page.entities }));
        add(page.events as StoredEvent[], page.fates, page.next === undefined);
        while (page.next !== undefined && !cancelled) {
          page = await readTimeline(client, domain, pid, { after: page.next, limit: NEXT_PAGES });
          if (!cancelled) add(page.events as StoredEvent[], page.fates, page.next === undefined);
        }
      } catch (error) {
        if (cancelled) return;
        // Offline: what the browser cache holds of the eventlog.
        const cached = await client.readCached(domain, pid).catch(() => undefined);
        setTimeline((current) =>
          cached && cached.events.length >= current.events.length
            ? { ...current, events: [...cached.events], count: cached.events.length, complete: true, stale: true, error }
            : { ...current, stale: true, error },
        );
      }
    };
    loading.current = load();
    return () => {
      cancelled = true;
    };
  }, [client, domain, pid]);

  // Live: events stored after what the timeline holds (its fates are read with them).
  useEffect(() => {
    const running = loading.current;
    if (!running || livePosition <= newest.current) return;
    let cancelled = false;
    void running.then(async () => {
      if (cancelled || livePosition <= newest.current) return;
      const after = newest.current;
      const page = await readTimeline(client, domain, pid, { after }).catch(() => undefined);
      if (!page || cancelled) return;
      const events = page.events as StoredEvent[];
      newest.current = events.at(-1)?.position ?? newest.current;
      setTimeline((current) => {
        const known = new Set(current.events.map((event) => event.id));
        const map = new Map(current.fates);
        for (const fate of page.fates) map.set(fate.eventId, fate);
        return { ...current, events: [...current.events, ...events.filter((event) => !known.has(event.id))], fates: map, count: page.count };
      });
    });
    return () => {
      cancelled = true;
    };
  }, [client, domain, pid, livePosition]);

  return timeline;
}
