/**
 * Leases at append (DeliveryLedger.claimAtAppend): while a group's members wait for work, its new
 * events are leased in the transaction that appends them, so that a job costs the append's commit and
 * the settle's, not a claim's too, and goes out as soon as it is stored rather than after its route.
 * A steady 500 jobs/s spent a third of the gateway's time in claims of one event each.
 *
 * Only where the group's rows are written up to the head before the batch (its watermark): then
 * every earlier event of it has its row and position order holds. Each event of the group gets its
 * row here, leased when the group takes it, free otherwise (its route then claims it as before).
 */
import type { StoredEvent } from '@eventflow/core';
import { DEFAULT_GROUP, deliveryPrefix, ledgerColumns, type AppendClaimer, type Claimed, type GroupKey, type GroupRecord } from '../ledger.js';
import { now as isoNow } from './statements.js';
import type { LedgerSql } from './ledger-sql.js';

/** What a claim knows of a group's rows (ledger.ts KnownGroup): written up to `materialized`. */
export interface Watermark {
  materialized: number;
}

interface Armed {
  group: GroupRecord;
  claimer: AppendClaimer;
}

interface Taken {
  armed: Armed;
  mark: Watermark;
  claimed: Claimed[];
  given: number;
  covered: boolean;
}

const groupId = (key: GroupKey): string => `${key.domain}\u0000${key.name}\u0000${key.group}`;

export class AppendClaims {
  readonly #sql: LedgerSql;
  readonly #watermark: (key: GroupKey) => Watermark | undefined;
  readonly #pidsRead: (key: GroupKey) => boolean;
  readonly #armed = new Map<string, Armed>();
  /** What the transaction under way leased, handed over at its end. */
  #taken: { after: number; groups: Taken[] } | undefined;

  /**
   * `watermark`: the group's rows as the claims know them, without reading the store (undefined: not
   * known); `pidsRead`: whether an ordered group reads the rows of the key's ledger (they carry pids).
   */
  constructor(sql: LedgerSql, watermark: (key: GroupKey) => Watermark | undefined, pidsRead: (key: GroupKey) => boolean) {
    this.#sql = sql;
    this.#watermark = watermark;
    this.#pidsRead = pidsRead;
  }

  set(group: GroupRecord, claimer: AppendClaimer | undefined): void {
    if (claimer && !group.ordered) this.#armed.set(groupId(group), { group, claimer });
    else this.#armed.delete(groupId(group));
  }

  forget(key: GroupKey): void {
    this.#armed.delete(groupId(key));
  }

  /** In the append's transaction: `published`, the batch's routed events in position order, between heads `before` and `after`. */
  lease(published: readonly StoredEvent[], before: number, after: number): void {
    this.#taken = undefined;
    if (this.#armed.size === 0) return;
    const groups: Taken[] = [];
    const updated = isoNow();
    const prefix = deliveryPrefix();
    for (const armed of this.#armed.values()) {
      const key = armed.group;
      const mark = this.#watermark(key);
      if (mark?.materialized !== before) continue;
      const taken: Taken = { armed, mark, claimed: [], given: 0, covered: true };
      groups.push(taken);
      const withPid = this.#pidsRead(key);
      for (const event of published) {
        if (event.domain !== key.domain || (key.name !== '*' && event.name !== key.name)) continue;
        // Position order: once the group takes no more, the rest wait for a claim.
        const lease = taken.covered ? armed.claimer.lease(event) : undefined;
        if (lease) taken.given += 1;
        else taken.covered = false;
        const row = this.#sql.get<{ delivery: string | null }>(
          `INSERT OR IGNORE INTO eventflow_delivery (event_id, domain, gname, grp, position, pid, name, attempts, updated, delivery, owner, deadline, claimed_at)
           VALUES (@id, @domain, @gname, @grp, @position, @pid, @name, @attempts, @updated,
             CASE WHEN @leased = 1 THEN @prefix || lower(hex(randomblob(16))) END, @owner, @deadline, @claimedAt)
           RETURNING delivery`,
          {
            id: event.id,
            domain: event.domain,
            ...ledgerColumns(key),
            position: event.position,
            pid: withPid ? event.pid : null,
            name: event.name,
            attempts: lease ? 1 : 0,
            updated,
            leased: lease ? 1 : 0,
            prefix,
            owner: lease?.owner ?? null,
            deadline: lease?.deadline ?? null,
            claimedAt: lease?.now ?? null,
          },
        );
        if (!lease) continue;
        // Written already: another default group of the ledger leased it in this batch.
        if (!row?.delivery) {
          taken.covered = false;
          continue;
        }
        taken.claimed.push({ event, delivery: row.delivery, attempt: 1 });
        if (key.group === DEFAULT_GROUP) {
          this.#sql.run(`UPDATE event_published SET consumed_spoke = @updated, consumer = @consumer WHERE event_id = @id`, { id: event.id, updated, consumer: lease.consumer });
        }
      }
    }
    this.#taken = { after, groups };
  }

  /** The append's transaction ended: what it leased goes to the claimers (committed), or nothing did. */
  ended(committed: boolean): void {
    const taken = this.#taken;
    this.#taken = undefined;
    if (!taken) return;
    for (const group of taken.groups) {
      if (!committed) {
        group.armed.claimer.abandoned(group.given);
        continue;
      }
      group.mark.materialized = Math.max(group.mark.materialized, taken.after);
      group.armed.claimer.committed(group.claimed, group.given, group.covered ? taken.after : undefined);
    }
  }
}
