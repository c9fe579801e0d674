/**
 * The statements of an append's batch (appends.ts, append-leases.ts), each an INSERT … SELECT FROM
 * JSON_TABLE(source): every row of a table in one JSON value, so that one prepared statement per table
 * serves every batch size in one round trip (multi-row VALUES need a statement per row count:
 * popcount(n) statements of power-of-two sizes). `source` is `?` in a prepared statement and a
 * parameter's name in the append routine (append-routine.ts), which runs the same statements in one
 * CALL. Strings are LONGTEXT in JSON_TABLE, so that a value too long for its column fails as it would
 * in VALUES (strict mode), instead of being cut to the JSON_TABLE column's length; a missing member is
 * NULL (NULL ON EMPTY, the default).
 */
const table = (source: string, columns: string): string => `JSON_TABLE(${source}, '$[*]' COLUMNS (${columns})) j`;
const EVENT_COLUMNS = `id LONGTEXT PATH '$.i', ts DATETIME(3) PATH '$.t', domain LONGTEXT PATH '$.d', rid LONGTEXT PATH '$.r', pid LONGTEXT PATH '$.p', name LONGTEXT PATH '$.n', data LONGTEXT PATH '$.x'`;

/** The INSERTs of the batch's tables, reading their rows from `source`. */
export function appendInserts(source: string) {
  return {
    event: `INSERT INTO event (id, timestamp, domain, rid, pid, name, data) SELECT j.id, j.ts, j.domain, j.rid, j.pid, j.name, j.data FROM ${table(source, EVENT_COLUMNS)}`,
    // MariaDB (10.5+): the clock read by the insert itself, under the sequence lock as the check's read is, and returned.
    eventClocked: `INSERT INTO event (id, timestamp, domain, rid, pid, name, data) SELECT j.id, UTC_TIMESTAMP(3), j.domain, j.rid, j.pid, j.name, j.data FROM ${table(source, EVENT_COLUMNS)}
    RETURNING id, timestamp`,
    // The trace context (PROTOCOL.md › Event input) beside the position: v4's `event` stays as v4 made it.
    position: `INSERT INTO eventflow_position (position, event_id, traceparent, tracestate) SELECT j.position, j.id, j.tp, j.ts FROM ${table(
      source,
      `position BIGINT PATH '$[0]', id LONGTEXT PATH '$[1]', tp LONGTEXT PATH '$[2]', ts LONGTEXT PATH '$[3]'`,
    )}`,
    // `c`: the default group's lease taken at append (append-leases.ts) is v4's consumer claim.
    published: `INSERT INTO event_published (event_id, published, publisher, hub, consumed_hub, consumer, consumed_spoke)
    SELECT j.id, UTC_TIMESTAMP(), j.publisher, j.hub, IF(j.hub IS NULL, NULL, UTC_TIMESTAMP()), j.c, IF(j.c IS NULL, NULL, UTC_TIMESTAMP()) FROM ${table(
      source,
      `id LONGTEXT PATH '$.i', publisher LONGTEXT PATH '$.p', hub LONGTEXT PATH '$.h', c LONGTEXT PATH '$.c'`,
    )}`,
    scheduled: `INSERT INTO event_scheduled (event_id, timestamp, scheduled) SELECT j.id, UTC_TIMESTAMP(), j.at FROM ${table(source, `id LONGTEXT PATH '$[0]', at DATETIME PATH '$[1]'`)}`,
    due: `INSERT INTO eventflow_schedule (event_id, due) SELECT j.id, j.due FROM ${table(source, `id LONGTEXT PATH '$[0]', due DATETIME(3) PATH '$[1]'`)}`,
    // The groups' rows (append-leases.ts), each an array (JSON_TABLE's paths by index); a free row has no lease members.
    leases: `INSERT INTO eventflow_delivery (event_id, domain, gname, grp, position, pid, name, attempts, updated, delivery, owner, deadline, claimed_at)
  SELECT j.id, j.domain, j.gname, j.grp, j.position, j.pid, j.name, IF(j.delivery IS NULL, 0, 1), UTC_TIMESTAMP(3), j.delivery, j.owner, j.deadline, j.claimed
  FROM ${table(
    source,
    `id VARCHAR(64) PATH '$[0]', domain VARCHAR(64) PATH '$[1]', gname VARCHAR(64) PATH '$[2]', grp VARCHAR(64) PATH '$[3]',
    position BIGINT PATH '$[4]', pid VARCHAR(64) PATH '$[5]', name VARCHAR(64) PATH '$[6]', delivery VARCHAR(96) PATH '$[7]', owner VARCHAR(64) PATH '$[8]',
    deadline BIGINT PATH '$[9]', claimed BIGINT PATH '$[10]'`,
  )}`,
  };
}
