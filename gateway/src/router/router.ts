/**
 * How stored events reach subscribers and consumers across a deployment. The in-process router
 * (local.ts) serves a single gateway; the hub router (v4 TLS mesh) spans gateways and v4 spokes;
 * the NATS router (nats/router.ts) spans gateways on one MySQL store.
 * A router never carries data the store does not have: it is called after the event is stored.
 */
import type { StoredEvent } from '@eventflow/core';

/**
 * The gateway side of routing: hands the domain's newly published events to this gateway's
 * connections. Only the domain is read: the events themselves come from the store.
 */
export interface RouteTarget {
  route(event: Pick<StoredEvent, 'domain'>): Promise<void>;
  /**
   * A hub's `publish` record for an event: routed as `route` does when this gateway has not routed it yet; when it
   * has (a v4 hub redelivering a stuck claim, eventflow-v4.md §11 A1), it goes to a consumer here again, if its
   * consumer claim is free and it has no outcome, without reaching subscribers or waits again.
   */
  routeAnnounced(event: StoredEvent): Promise<void>;
  /**
   * Another gateway stored events in `domain` (undefined: in any domain, as after a reconnect): the
   * pattern subscriptions here read what is new, if a pattern of theirs matches it. For a router that
   * hears only of the (domain, name) pairs this gateway is interested in (`setPatternInterest`).
   */
  routePatterns?(domain: string | undefined): void;
}

/** A router's readiness (`/readyz`): why not, as a short reason, never an error message. */
export interface RouterStatus {
  ready: boolean;
  /** Ready, with less than full service (`/readyz` status `degraded`, still 200). */
  degraded?: boolean;
  reason?: string;
  [detail: string]: unknown;
}

export interface Router {
  readonly kind: string;
  /**
   * Consumers the store's groups do not list may take events (v4 spokes in the hub mesh: v4 has no groups).
   * request()'s E_EVENTFLOW_NO_CONSUMER cannot then tell that nobody takes an event, and is not given.
   */
  readonly outsideConsumers?: boolean;
  /**
   * The hub id of a router that routes right after the store's commit (the embedded one): a
   * publish takes this router's routing claim in its append transaction (AppendOptions.routedBy)
   * and says so to `publish`. Undefined for a router that claims by itself, or not at all.
   */
  readonly claimsOnAppend?: string | undefined;
  start(target: RouteTarget): Promise<void>;
  /**
   * Routes a stored event (with its event_published row) to every subscriber and one consumer.
   * `claimed`: the routing claim was taken for this router when the event was stored.
   */
  publish(event: StoredEvent, claimed?: boolean): Promise<void>;
  /** This gateway's connections gained their first, or lost their last, interest in (domain, name). */
  setInterest(domain: string, name: string, interested: boolean): void;
  /**
   * This gateway's connections gained their first, or lost their last, pattern subscription: a
   * pattern may match any domain, so a router that routes by interest must hear of every domain's
   * events then (and tell `RouteTarget.routePatterns`).
   */
  setPatternInterest?(interested: boolean): void;
  /** Readiness for `/readyz`, for a router that can be degraded (the hub router reports `connected` instead). */
  status?(): RouterStatus;
  /** An event was scheduled through this gateway: tell the other gateways' schedulers. */
  scheduled?(): void;
  /** `listener` runs when another gateway scheduled an event (its scheduler re-reads the next due time). */
  onScheduledElsewhere?(listener: () => void): void;
  close(): Promise<void>;
}
