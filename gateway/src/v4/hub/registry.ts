/**
 * The hub's routing table (eventflow-v4.md §6.3, §6.5): domain → name → subscribed connections, in
 * memory only, per connection. `*` is just another name when (un)subscribing; when routing it is
 * additive: the recipients of (domain, name) are the subscribers of (domain, name) ∪ (domain, `*`),
 * each once. There is no domain wildcard.
 */
export class HubRegistry<C> {
  readonly #domains = new Map<string, Map<string, Set<C>>>();
  /** Each connection's (domain, name) pairs, for removal on close. */
  readonly #byConnection = new Map<C, Map<string, Set<string>>>();

  /** Idempotent. */
  subscribe(connection: C, domain: string, name: string): void {
    let names = this.#domains.get(domain);
    if (!names) this.#domains.set(domain, (names = new Map()));
    let members = names.get(name);
    if (!members) names.set(name, (members = new Set()));
    members.add(connection);
    let own = this.#byConnection.get(connection);
    if (!own) this.#byConnection.set(connection, (own = new Map()));
    let ownNames = own.get(domain);
    if (!ownNames) own.set(domain, (ownNames = new Set()));
    ownNames.add(name);
  }

  /** Removes exactly (connection, domain, name); unsubscribing `x` leaves `*`. Idempotent. */
  unsubscribe(connection: C, domain: string, name: string): void {
    const names = this.#domains.get(domain);
    const members = names?.get(name);
    if (members?.delete(connection) && members.size === 0) {
      names!.delete(name);
      if (names!.size === 0) this.#domains.delete(domain);
    }
    const own = this.#byConnection.get(connection);
    const ownNames = own?.get(domain);
    if (ownNames?.delete(name) && ownNames.size === 0) {
      own!.delete(domain);
      if (own!.size === 0) this.#byConnection.delete(connection);
    }
  }

  /** Drops every subscription of a connection (it closed). */
  remove(connection: C): void {
    const own = this.#byConnection.get(connection);
    if (!own) return;
    for (const [domain, names] of own) for (const name of [...names]) this.unsubscribe(connection, domain, name);
    this.#byConnection.delete(connection);
  }

  /** (domain, name) ∪ (domain, `*`), each connection once. */
  recipients(domain: string, name: string): Set<C> {
    const names = this.#domains.get(domain);
    return new Set([...(names?.get(name) ?? []), ...(name === '*' ? [] : (names?.get('*') ?? []))]);
  }

  /** The pairs a connection is subscribed to, for diagnostics and tests. */
  subscriptions(connection: C): Array<[domain: string, name: string]> {
    return [...(this.#byConnection.get(connection) ?? [])].flatMap(([domain, names]) => [...names].map((name): [string, string] => [domain, name]));
  }

  clear(): void {
    this.#domains.clear();
    this.#byConnection.clear();
  }
}
