/**
 * Which row of an ordered group's ledger (`d`) a claim may take, on both stores: the first unsettled
 * row of its pid, and none while a later row of its pid holds a lease in force.
 *
 * The second part is for a dead letter requeued (`requeue`): its dead letter counted as its outcome,
 * so the pid's next events went on, and one of them may be open when it comes back. Claimed then, the
 * pid had two deliveries open at once (on two members). Once it is claimed, it is the pid's first
 * unsettled row and holds the later ones back as any other. Only a row that was settled and has no
 * attempt since (a requeued one; a hand-back not counted, rarely) is checked, so a claim does not read
 * every later row of a pid with a long backlog.
 */
import { OWNED_ROW } from './ledger.js';

/**
 * SQL for `d` being claimable in an ordered group. `now`: the claim's time as a parameter (`@now` on
 * SQLite, `?` on MySQL, bound after the parameters that come before this text); `sameName`: the
 * default group of a name, whose ledger is shared with the domain's other names; `created`: the
 * group's createdPosition as SQL likewise (on MySQL its `?` comes before `now`'s). A row at or below it
 * is an earlier group's (a default group's rows outlive its delete, see OWNED_ROW) and is never
 * claimed again: counted here, it held the new group's events of its pid back for good.
 */
export function orderedClaimable(now: string, sameName: boolean, created: string): string {
  const pid = `o.domain = d.domain AND o.gname = d.gname AND o.grp = d.grp AND o.pid = d.pid AND o.outcome IS NULL ${sameName ? 'AND o.name = d.name' : ''}`;
  // Nor a row no group owns (OWNED_ROW): across names, one of a default group deleted before the `*` group was made,
  // which no claim takes, held the pid back for good.
  return `NOT EXISTS (SELECT 1 FROM eventflow_delivery o WHERE ${pid} AND o.position < d.position AND o.position > ${created} AND ${OWNED_ROW('o')})
    AND (d.attempts > 0 OR d.settled_at IS NULL OR NOT EXISTS (SELECT 1 FROM eventflow_delivery o WHERE ${pid} AND o.position > d.position AND o.deadline > ${now}))`;
}

/**
 * SQL columns of the group row `g`, for its claims: `claim_ordered`, whether they go in pid order, and
 * `across_names`, whether a pid's order runs across event names (a default group's row of name X
 * waits for the pid's earlier rows of other names). The default groups of (domain, name) and of
 * (domain, `*`) share one ledger and one claim per event: `ordered` on either holds both's claims of
 * the events they share (before, the unordered one's claims took a pid's events while the ordered
 * one had one open: 5 of 10 at once). The `*` group's order spans names, a name's only its own.
 */
export function claimOrderColumns(g: string): string {
  const ordered = (name: string) => `EXISTS (SELECT 1 FROM eventflow_group s WHERE s.domain = ${g}.domain AND s.grp = '' AND s.ordered = 1 AND ${name})`;
  return `CASE WHEN ${g}.ordered = 1 OR (${g}.grp = '' AND ${ordered(`(${g}.name = '*' OR s.name = '*')`)}) THEN 1 ELSE 0 END AS claim_ordered,
    CASE WHEN ${g}.grp = '' AND ${ordered(`s.name = '*'`)} THEN 1 ELSE 0 END AS across_names`;
}
