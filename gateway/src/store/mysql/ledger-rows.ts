/** What the MySQL ledger's parts share (ledger.ts, ledger-operator.ts): its group rows and records, the id list of its joins. */
import type { GroupKey, GroupRecord } from '../ledger.js';

export type GroupRow = { domain: string; name: string; grp: string; created_position: number | string; created_at: Date; ordered: number; materialized: number | string | null };

/** A BIGINT as the driver returns it (a number or a string), or undefined for NULL. */
export const num = (value: string | number | null | undefined): number | undefined => (value === null || value === undefined ? undefined : Number(value));

export const toRecord = (row: GroupRow): GroupRecord => ({
  domain: row.domain,
  name: row.name,
  group: row.grp,
  createdPosition: Number(row.created_position),
  createdAt: row.created_at.toISOString(),
  ordered: Number(row.ordered) === 1,
});

/** A JSON_TABLE of strings (ids) for joins: one prepared statement whatever the list's length. */
export const ID_TABLE = `JSON_TABLE(?, '$[*]' COLUMNS (id VARCHAR(96) CHARACTER SET ascii COLLATE ascii_bin PATH '$')) j`;

/** How long a gateway goes by the group row it read (its `ordered`, the watermark in the store). */
export const GROUP_READ_MS = 1_000;

/** A group as the claims of this gateway know it. */
export interface CachedGroup {
  created: number;
  ordered: boolean;
  /** Every event of the group's filter up to this position has its row. */
  materialized: number;
  /** The store's head when the row was read. */
  head: number;
  readAt: number;
  /** When the watermark was last written to the store. */
  persistedAt: number;
}

export const groupId = (key: GroupKey): string => `${key.domain}\u0000${key.name}\u0000${key.group}`;
