/**
 * The console's places, as URL hashes (so that the gateway serves one index.html for all of them,
 * at `/` or at `/console/`). `sections` is the navigation: a new view is one entry here and one
 * case in App.tsx.
 */
import { useSyncExternalStore } from 'react';

export type Route =
  | { view: 'domains' }
  | { view: 'processes'; domain: string }
  | { view: 'process'; domain: string; pid: string }
  | { view: 'live'; domain?: string }
  | { view: 'scheduled' }
  | { view: 'work' }
  | { view: 'gateway' }
  | { view: 'latency'; domain?: string | undefined; name?: string | undefined; windowMs?: number | undefined }
  | { view: 'publish'; domain?: string; pid?: string };

export type Section = { view: Route['view']; label: string; /** Shown only when the token may do this somewhere. */ needs?: string };

export const sections: readonly Section[] = [
  { view: 'domains', label: 'Domains' },
  { view: 'live', label: 'Live' },
  { view: 'scheduled', label: 'Scheduled' },
  { view: 'work', label: 'Work', needs: 'consume' },
  { view: 'latency', label: 'Latency', needs: 'read' },
  { view: 'gateway', label: 'Gateway' },
  { view: 'publish', label: 'Publish', needs: 'publish' },
];

const part = (value: string): string => encodeURIComponent(value);

export function href(route: Route): string {
  switch (route.view) {
    case 'domains':
      return '#/';
    case 'processes':
      return `#/d/${part(route.domain)}`;
    case 'process':
      return `#/d/${part(route.domain)}/p/${part(route.pid)}`;
    case 'live':
      return route.domain ? `#/live/${part(route.domain)}` : '#/live';
    case 'latency': {
      const query = new URLSearchParams();
      if (route.domain) query.set('domain', route.domain);
      if (route.name) query.set('name', route.name);
      if (route.windowMs) query.set('window', String(route.windowMs));
      const search = query.toString();
      return search ? `#/latency?${search}` : '#/latency';
    }
    case 'publish': {
      const query = new URLSearchParams();
      if (route.domain) query.set('domain', route.domain);
      if (route.pid) query.set('pid', route.pid);
      const search = query.toString();
      return search ? `#/publish?${search}` : '#/publish';
    }
    default:
      return `#/${route.view}`;
  }
}

export function parseRoute(hash: string): Route {
  const [path = '', search = ''] = hash.replace(/^#/, '').split('?');
  const parts = path.split('/').filter(Boolean).map((piece) => {
    try {
      return decodeURIComponent(piece);
    } catch {
      return piece;
    }
  });
  const [first, second, third, fourth] = parts;
  if (first === 'd' && second && third === 'p' && fourth) return { view: 'process', domain: second, pid: fourth };
  if (first === 'd' && second) return { view: 'processes', domain: second };
  if (first === 'live') return second ? { view: 'live', domain: second } : { view: 'live' };
  if (first === 'scheduled' || first === 'work' || first === 'gateway') return { view: first };
  if (first === 'latency') {
    const query = new URLSearchParams(search);
    const windowMs = Number(query.get('window'));
    return { view: 'latency', domain: query.get('domain') ?? undefined, name: query.get('name') ?? undefined, windowMs: Number.isSafeInteger(windowMs) && windowMs > 0 ? windowMs : undefined };
  }
  if (first === 'publish') {
    const query = new URLSearchParams(search);
    return { view: 'publish', domain: query.get('domain') ?? undefined, pid: query.get('pid') ?? undefined };
  }
  return { view: 'domains' };
}

const subscribe = (notify: () => void): (() => void) => {
  window.addEventListener('hashchange', notify);
  return () => window.removeEventListener('hashchange', notify);
};

/** The hash, re-rendering when it changes; parse it with parseRoute (a new object every call). */
export function useHash(): string {
  return useSyncExternalStore(subscribe, () => window.location.hash, () => '');
}
