/** The records a hub reads from its clients (§6.3, §9.3), and the routing of publishes to subscribed sockets. */
import type { MysqlStore } from '../../store/mysql/mysql.js';
import { encodeRecord } from '../codec.js';
import type { HubClient } from './client.js';
import type { HubRegistry } from './registry.js';
import { asciiText } from './store.js';

/** Unfinished publishes per connection before its socket stops being read. */
const MAX_IN_FLIGHT = 256;
const PONG = encodeRecord(['pong']);
/** Invalid records logged per connection; further ones are counted only. */
const MAX_INVALID_LOGGED = 10;

/** What routing needs of its hub. */
export interface HubRoutingDeps {
  /** The hub's id (it claims and announces under it). */
  id: string;
  registry: HubRegistry<HubClient>;
  /** The broadcast set: connections that received STX. */
  ready: ReadonlySet<HubClient>;
  store: MysqlStore;
  maxBufferedBytes: number;
  /** The hub's log row and process log line. */
  log(message: string, error?: unknown): void;
  /** Work the hub's destroy() waits for. */
  track<T>(promise: Promise<T>): Promise<T>;
}

export class HubRouting {
  readonly #deps: HubRoutingDeps;

  constructor(deps: HubRoutingDeps) {
    this.#deps = deps;
  }

  /** Bytes read from a client: its records, in order. */
  data(client: HubClient, chunk: Buffer): void {
    if (client.closed) return;
    let records: string[][];
    try {
      records = client.decoder.push(chunk);
    } catch (error) {
      this.#deps.log(`dropped spoke ${client.id}: unreadable data`, error);
      client.socket.destroy();
      return;
    }
    for (const units of records) {
      if (client.closed) return;
      this.#record(client, units);
    }
  }

  #record(client: HubClient, units: string[]): void {
    const type = units[0] ?? '';
    switch (type) {
      case 'subscribe':
      case 'unsubscribe': {
        const [, domain, name] = units;
        if (!domain || !name) return this.#invalid(client, type, 'without domain or name');
        if (type === 'subscribe') this.#deps.registry.subscribe(client, domain, name);
        else this.#deps.registry.unsubscribe(client, domain, name);
        return;
      }
      case 'publish':
        return this.#publish(client, units);
      case 'online':
        return this.#online(client, units);
      case 'ping':
        // Ours (v4/hub-pings.ts): a gateway watching this hub's liveness. v4 has no heartbeat.
        return this.#send(client, PONG);
      default:
        return this.#invalid(client, type);
    }
  }

  #invalid(client: HubClient, type: string, detail = ''): void {
    client.invalid += 1;
    if (client.invalid <= MAX_INVALID_LOGGED) {
      this.#deps.log(`observed invalid message ${asciiText(type, 64)}${detail ? ` ${detail}` : ''} from spoke ${client.id}`);
    }
    if (client.invalid === MAX_INVALID_LOGGED) this.#deps.log(`further invalid messages from spoke ${client.id} are not logged`);
  }

  /** Claims run concurrently; routing follows the order received (the tail chain). */
  #publish(client: HubClient, units: string[]): void {
    const [, domain, id, name, pid = ''] = units;
    if (!domain || !id || !name) return this.#invalid(client, 'publish', 'without domain, id or name');
    const claim = this.#claim(id);
    client.inFlight += 1;
    if (client.inFlight >= MAX_IN_FLIGHT && !client.paused) {
      client.paused = true;
      client.socket.pause();
    }
    const task = client.tail
      .then(async () => {
        if (await claim) this.route(domain, id, name, pid);
      })
      .catch((error: unknown) => this.#deps.log(`failed to route event ${id}`, error))
      .finally(() => {
        client.inFlight -= 1;
        if (client.paused && client.inFlight <= MAX_IN_FLIGHT / 2) {
          client.paused = false;
          if (!client.closed) client.socket.resume();
        }
      });
    client.tail = task;
    this.#deps.track(task);
  }

  /**
   * v4's guarded routing claim; false (and a log row) if the database fails. Decided before its commit's log flush
   * (MysqlStore.claimForRoutingEarly): the event is routed while the claim commits.
   */
  #claim(eventId: string): Promise<boolean> {
    return this.#deps.store.claimForRoutingEarly(eventId, this.#deps.id).then(
      ({ won, durable }) => {
        this.#deps.track(durable.catch((error: unknown) => this.#deps.log(`failed to commit the routing claim of event ${asciiText(eventId, 64)}`, error)));
        return won;
      },
      (error: unknown) => {
        this.#deps.log(`failed to claim event ${asciiText(eventId, 64)} for routing`, error);
        return false;
      },
    );
  }

  /**
   * Sends `publish(domain, id, name, pid)` to (domain, name) ∪ (domain, `*`), once each, or marks the
   * event orphan (with its id, §9.4) if nobody is subscribed. Synchronous apart from the orphan mark.
   */
  route(domain: string, id: string, name: string, pid: string): void {
    const recipients = [...this.#deps.registry.recipients(domain, name)].filter((client) => client.ready && !client.closed);
    if (recipients.length === 0) {
      this.#deps.track(
        this.#deps.store.markOrphan(id).then(
          () => this.#deps.log(`observed an orphan event ${id} (${domain} ${name})`),
          (error: unknown) => this.#deps.log(`failed to mark event ${id} orphan`, error),
        ),
      );
      return;
    }
    const record = encodeRecord(['publish', domain, id, name, pid]);
    for (const client of recipients) this.#send(client, record);
  }

  #send(client: HubClient, record: Buffer): void {
    if (client.closed) return;
    client.socket.write(record);
    if (client.socket.writableLength > this.#deps.maxBufferedBytes) {
      this.#deps.log(`dropped spoke ${client.id}: ${client.socket.writableLength} bytes unsent`);
      client.socket.destroy();
    }
  }

  #online(client: HubClient, units: string[]): void {
    const [, hubId, ip, port] = units;
    if (!hubId || !ip || !port) return this.#invalid(client, 'online', 'without hub id, ip or port');
    if (hubId.toUpperCase() === this.#deps.id) return;
    if (hubId.toUpperCase() !== client.id.toUpperCase()) {
      this.#deps.log(`ignored online status of ${asciiText(hubId, 64)} from ${client.id}: a hub announces only itself`);
      return;
    }
    const record = encodeRecord([units[0], hubId, ip, port]);
    for (const target of this.#deps.ready) this.#send(target, record);
    this.#deps.log(`forwarded online status of peer hub ${hubId} at ${asciiText(ip, 64)}:${asciiText(port, 8)}`);
  }
}
