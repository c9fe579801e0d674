/**
 * Pattern subscriptions (aether's namespace patterns and subscription filters): which connections'
 * pattern subscriptions an event matches, and the one pump that hands events to them in position
 * order across every domain.
 *
 * Cost: the index is a token trie of the patterns (as NATS's sublist), so matching a domain walks
 * its tokens through the trie's literal, `*` and `>` branches: the work grows with the domain's
 * tokens and the subscriptions it matches, not with the number of patterns or of domains they
 * match. The pump reads published events of all domains after its cursor, one page per query
 * (never a query per domain); it runs only while there is a pattern subscription.
 *
 * Order: per-domain pumps (dispatcher.ts) hand events out per domain, so two domains' events may
 * leave in either order. A pattern subscription resumes from one position over all its domains,
 * so its events must leave in position order: one cursor over the whole store does that (a
 * position becomes visible only after every lower one has committed, store/mysql/positions.ts).
 */
import { matchNamespacePattern, type StoredEvent } from '@eventflow/core';
import { glob, type Glob } from '../connection/glob.js';
import { PULL_AGAIN_MS } from '../defaults.js';
import type { EventStore } from '../store/store.js';
import type { Peer } from './peer.js';

/** Events per read of the pattern pump. */
const PATTERN_PAGE = 500;

/** One pattern subscription of one connection. */
export interface PatternFilter {
  readonly pattern: string;
  /** Event names (any of them); undefined: every name. */
  readonly names?: readonly string[] | undefined;
  /** A pid pattern (`*` any run of characters); undefined: every pid. */
  readonly pid?: string | undefined;
}

interface Entry {
  readonly peer: Peer;
  readonly handle: string;
  readonly names: ReadonlySet<string> | undefined;
  readonly pid: Glob | undefined;
  readonly tokens: readonly string[];
}

interface TrieNode {
  readonly literal: Map<string, TrieNode>;
  star: TrieNode | undefined;
  /** Entries whose pattern ends with `>` after this node. */
  readonly rest: Set<Entry>;
  /** Entries whose pattern ends at this node. */
  readonly here: Set<Entry>;
}

const node = (): TrieNode => ({ literal: new Map(), star: undefined, rest: new Set(), here: new Set() });

/** Whether an entry's filters (names AND pid) take the event; the pattern was matched by the trie. */
const takes = (entry: Entry, event: StoredEvent): boolean => (entry.names === undefined || entry.names.has(event.name)) && (entry.pid === undefined || entry.pid.test(event.pid));

/** The trie of pattern subscriptions. */
export class PatternIndex {
  readonly #root = node();
  /** Peer → handle → entry. */
  readonly #byPeer = new Map<Peer, Map<string, Entry>>();
  #count = 0;

  get count(): number {
    return this.#count;
  }

  add(peer: Peer, handle: string, filter: PatternFilter): void {
    this.remove(peer, handle);
    const tokens = filter.pattern.split('.');
    const entry: Entry = { peer, handle, names: filter.names && new Set(filter.names), pid: filter.pid === undefined ? undefined : glob(filter.pid), tokens };
    let at = this.#root;
    for (const [i, token] of tokens.entries()) {
      if (token === '>' && i === tokens.length - 1) {
        at.rest.add(entry);
        break;
      }
      let next = token === '*' ? at.star : at.literal.get(token);
      if (!next) {
        next = node();
        if (token === '*') at.star = next;
        else at.literal.set(token, next);
      }
      at = next;
      if (i === tokens.length - 1) at.here.add(entry);
    }
    let handles = this.#byPeer.get(peer);
    if (!handles) this.#byPeer.set(peer, (handles = new Map()));
    handles.set(handle, entry);
    this.#count++;
  }

  remove(peer: Peer, handle: string): void {
    const handles = this.#byPeer.get(peer);
    const entry = handles?.get(handle);
    if (!handles || !entry) return;
    handles.delete(handle);
    if (handles.size === 0) this.#byPeer.delete(peer);
    this.#count--;
    // Walk down, then prune the nodes left empty on the way back up.
    const path: Array<[TrieNode, string]> = [];
    let at: TrieNode | undefined = this.#root;
    for (const [i, token] of entry.tokens.entries()) {
      if (token === '>' && i === entry.tokens.length - 1) {
        at.rest.delete(entry);
        break;
      }
      const next: TrieNode | undefined = token === '*' ? at.star : at.literal.get(token);
      if (!next) return;
      path.push([at, token]);
      at = next;
      if (i === entry.tokens.length - 1) at.here.delete(entry);
    }
    for (let i = path.length - 1; i >= 0; i--) {
      const [parent, token] = path[i] as [TrieNode, string];
      const child = token === '*' ? parent.star : parent.literal.get(token);
      if (!child || child.here.size > 0 || child.rest.size > 0 || child.literal.size > 0 || child.star) break;
      if (token === '*') parent.star = undefined;
      else parent.literal.delete(token);
    }
  }

  removePeer(peer: Peer): void {
    for (const handle of [...(this.#byPeer.get(peer)?.keys() ?? [])]) this.remove(peer, handle);
  }

  /** The entries whose pattern matches `domain` (filters not applied). */
  #matching(domain: string): Entry[] {
    const found: Entry[] = [];
    let nodes: TrieNode[] = [this.#root];
    const tokens = domain.split('.');
    for (const token of tokens) {
      const next: TrieNode[] = [];
      for (const at of nodes) {
        for (const entry of at.rest) found.push(entry);
        const literal = at.literal.get(token);
        if (literal) next.push(literal);
        if (at.star) next.push(at.star);
      }
      if (next.length === 0) return found;
      nodes = next;
    }
    for (const at of nodes) for (const entry of at.here) found.push(entry);
    return found;
  }

  /** Whether any pattern subscription's pattern matches `domain` (its filters not applied). */
  matches(domain: string): boolean {
    return this.#count > 0 && this.#matching(domain).length > 0;
  }

  /** Whether any pattern subscription takes the event. */
  wants(event: StoredEvent): boolean {
    return this.#count > 0 && this.#matching(event.domain).some((entry) => takes(entry, event));
  }

  /** Hands the event to every connection with a pattern subscription that takes it, once per connection. */
  send(event: StoredEvent): void {
    const byPeer = new Map<Peer, string[]>();
    for (const entry of this.#matching(event.domain)) {
      if (!takes(entry, event)) continue;
      const handles = byPeer.get(entry.peer);
      if (handles) handles.push(entry.handle);
      else byPeer.set(entry.peer, [entry.handle]);
    }
    for (const [peer, handles] of byPeer) peer.sendMatched?.(event, handles);
  }
}

/** The filter of one pattern subscription as a predicate, for its replay (the live path uses the index). */
export function patternPredicate(filter: PatternFilter): (event: StoredEvent) => boolean {
  const names = filter.names && new Set(filter.names);
  const pid = filter.pid === undefined ? undefined : glob(filter.pid);
  return (event) => matchNamespacePattern(filter.pattern, event.domain) && (names === undefined || names.has(event.name)) && (pid === undefined || pid.test(event.pid));
}

/** The pump of pattern subscriptions: published events of every domain, in position order. */
export class PatternPump {
  readonly #store: Pick<EventStore, 'readPublishedSince'>;
  readonly #index: PatternIndex;
  readonly #onError: (error: unknown) => void;
  /** Events up to here were handed out; undefined while there is no pattern subscription. */
  #cursor: number | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  /** The timer of a pull made again after a failed one. */
  #retryTimer: ReturnType<typeof setTimeout> | undefined;
  #stopped = false;

  constructor(store: Pick<EventStore, 'readPublishedSince'>, index: PatternIndex, onError: (error: unknown) => void) {
    this.#store = store;
    this.#index = index;
    this.#onError = onError;
  }

  /**
   * A pattern subscription was added, `head` being the store's head before it was. The pump hands
   * out what comes after its cursor; the subscription's own replay (connection/session.ts) covers
   * what lies between `head` and the moment it joined the index.
   */
  added(head: number): void {
    this.#cursor ??= head;
  }

  /** The last pattern subscription left: the cursor goes, so that the next one starts at its own head. */
  emptied(): void {
    if (this.#index.count === 0 && this.#running === undefined) this.#cursor = undefined;
  }

  /** An event was stored and routed somewhere: read what is new. */
  notify(): void {
    if (this.#cursor === undefined) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = (async () => {
      try {
        do {
          this.#again = false;
          await this.#pump();
        } while (this.#again);
      } catch (error) {
        this.#onError(error);
        this.#pullAgain();
      } finally {
        this.#running = undefined;
      }
    })();
  }

  /** The gateway stops: no pull is made again. */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#retryTimer);
  }

  /** A failed pull is made again (PULL_AGAIN_MS), not only at the next event routed here. */
  #pullAgain(): void {
    if (this.#stopped || this.#retryTimer !== undefined) return;
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = undefined;
      this.notify();
    }, PULL_AGAIN_MS);
    this.#retryTimer.unref();
  }

  async #pump(): Promise<void> {
    for (;;) {
      if (this.#index.count === 0) {
        this.#cursor = undefined;
        return;
      }
      const after = this.#cursor;
      if (after === undefined) return;
      const page = await this.#store.readPublishedSince(after, PATTERN_PAGE);
      for (const event of page) {
        this.#cursor = event.position;
        this.#index.send(event);
      }
      if (page.length < PATTERN_PAGE) return;
    }
  }
}
