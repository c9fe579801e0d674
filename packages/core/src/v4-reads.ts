/**
 * The `v4Reads` feature (features.ts): v4's reads and associations that few browser applications
 * call (by timestamp, by names, by child process, by entity id; the two associations). Node
 * clients have it by default; a browser bundles it only when it passes `v4Reads`.
 */
import { toIso } from './arguments.js';
import type { ClientFeature, FeatureHost, FeaturePart } from './features.js';
import type { Params, StoredEvent } from './protocol.js';
import { assertNames } from './validate.js';

type Time = Date | number | string;

/** The methods the feature brings; the client's methods of the same names delegate to them. */
export interface V4Reads extends FeaturePart {
  readEventlogByTimestamp(domain: string, pid: string, min: Time, max: Time): Promise<StoredEvent[]>;
  readEventlogFilteredByNames(domain: string, pid: string, names: string[]): Promise<StoredEvent[]>;
  readEventlogByChildProcess(domain: string, cpid: string): Promise<StoredEvent[]>;
  readEventlogByEid(eid: string): Promise<StoredEvent[]>;
  readEventlogByDomainAndEid(domain: string, eid: string): Promise<StoredEvent[]>;
  persistEntityAssociation(eventId: string, eid: string): Promise<true>;
  persistChildProcessAssociation(eventId: string, domain: string, cpid: string): Promise<true>;
}

type EventsOperation = 'readEventlogByTimestamp' | 'readEventlogFilteredByNames' | 'readEventlogByChildProcess' | 'readEventlogByEid' | 'readEventlogByDomainAndEid';

function create({ client }: FeatureHost): V4Reads {
  // The client's `call` checks the identifiers; the reads resolve with the result's events.
  const events = async <O extends EventsOperation>(op: O, params: Params<O>): Promise<StoredEvent[]> => ((await client.call(op, params)) as { events: StoredEvent[] }).events;
  return {
    readEventlogByTimestamp: (domain, pid, min, max) => events('readEventlogByTimestamp', { domain, pid, from: toIso(min, 'min'), to: toIso(max, 'max') }),
    readEventlogFilteredByNames: (domain, pid, names) => (assertNames(names), events('readEventlogFilteredByNames', { domain, pid, names })),
    readEventlogByChildProcess: (domain, cpid) => events('readEventlogByChildProcess', { domain, cpid }),
    readEventlogByEid: (eid) => events('readEventlogByEid', { eid }),
    readEventlogByDomainAndEid: (domain, eid) => events('readEventlogByDomainAndEid', { domain, eid }),
    persistEntityAssociation: async (eventId, eid) => (await client.call('persistEntityAssociation', { eventId, eid }), true),
    persistChildProcessAssociation: async (eventId, domain, cpid) => (await client.call('persistChildProcessAssociation', { eventId, domain, cpid }), true),
  };
}

export const v4Reads: ClientFeature<'v4Reads', V4Reads> = { name: 'v4Reads', create };
