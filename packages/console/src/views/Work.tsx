/**
 * Work: the consumer groups of each (domain, name) with their counts, and the dead letters with the
 * handler's last error; Requeue and Discard (after a confirmation in the row) where the token may
 * `manage` the domain. Both lists are read together and again every 5 s.
 */
import { useRef, useState, type KeyboardEvent, type ReactNode } from 'react';
import { discardDeadLetter, listDeadLetters, listGroups, requeueDeadLetter, type DomainSummary, type Result } from '@eventflow/core';
import { useEventflowClient } from '@eventflow/browser/react';
import { ErrorNote, Loading, Stale, Time } from '../components.js';
import { useQuery } from '../query.js';
import { href } from '../routes.js';

type DeadLetter = Result<'deadLetters'>['deadLetters'][number];
type Group = Result<'groups'>['groups'][number];
type Act = 'requeue' | 'discard';

const DEAD_LETTER_PAGE = 200;

const letterKey = (letter: DeadLetter): string => [letter.eventId, letter.domain, letter.consumes, letter.group].join('\u001f');
const groupLabel = (group: string): string => (group === '' ? 'default' : group);

/** How long ago `iso` was, coarsely ("42 s", "3 min", "2 h 5 min"). */
function age(iso: string, now: number): string {
  const seconds = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  return hours < 48 ? `${hours} h ${minutes % 60} min` : `${Math.floor(hours / 24)} d`;
}

export function Work({ domains }: { domains: DomainSummary[] | undefined }): ReactNode {
  const client = useEventflowClient();
  const work = useQuery(
    'work',
    async (c) => {
      const [groups, deadLetters] = await Promise.all([listGroups(c), listDeadLetters(c, { limit: DEAD_LETTER_PAGE })]);
      return { groups, deadLetters };
    },
    { refreshMs: 5_000 },
  );
  const [confirming, setConfirming] = useState<{ key: string; act: Act } | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  const [message, setMessage] = useState('');
  const [failure, setFailure] = useState<unknown>(undefined);
  // The row of an acted-on dead letter goes away: the focus goes to the result instead of the page's start.
  const result = useRef<HTMLParagraphElement>(null);
  const mayManage = (domain: string): boolean => domains?.find((d) => d.domain === domain)?.actions.includes('manage') ?? false;

  const act = async (letter: DeadLetter, what: Act, label: string): Promise<void> => {
    setFailure(undefined);
    setBusy(true);
    const key = { eventId: letter.eventId, domain: letter.domain, name: letter.consumes, group: letter.group };
    try {
      const done = what === 'requeue' ? await requeueDeadLetter(client, key) : await discardDeadLetter(client, key);
      setMessage(done ? `${what === 'requeue' ? 'Requeued' : 'Discarded'} ${label}.` : `${label} was no longer a dead letter.`);
      setConfirming(undefined);
      result.current?.focus();
      work.reload();
    } catch (error) {
      setFailure(error);
    } finally {
      setBusy(false);
    }
  };
  const onKey = (key: KeyboardEvent): void => {
    if (key.key === 'Escape') setConfirming(undefined);
  };

  const now = work.at ?? Date.now();
  const groups = work.data?.groups;
  const letters = work.data?.deadLetters;
  const sorted = groups && [...groups].sort((a, b) => a.domain.localeCompare(b.domain) || a.name.localeCompare(b.name) || a.group.localeCompare(b.group));

  return (
    <section aria-labelledby="work-title">
      <h1 id="work-title">Work</h1>
      <p role="status" aria-live="polite" data-testid="work-message" tabIndex={-1} ref={result}>
        {message}
      </p>
      <ErrorNote error={failure} />
      <Stale stale={work.stale} at={work.at} hasData={work.data !== undefined} />
      <h2 id="groups-title">Consumer groups</h2>
      {sorted === undefined ? (
        <Loading what="consumer groups" />
      ) : sorted.length === 0 ? (
        <p>No consumer group in the domains this token may consume.</p>
      ) : (
        <table className="grid" data-testid="group-list" aria-labelledby="groups-title">
          <caption className="visually-hidden">Consumer groups per domain and event name, with their backlog and dead letters</caption>
          <thead>
            <tr>
              <th scope="col">Group</th>
              <th scope="col" className="num" title="Consumers connected to this gateway; those of other gateways on the same store are not counted">
                Members here
              </th>
              <th scope="col" className="num">
                Pending
              </th>
              <th scope="col" className="num">
                In flight
              </th>
              <th scope="col" className="num">
                Redelivered
              </th>
              <th scope="col" className="num">
                Dead letters
              </th>
              <th scope="col">Oldest pending</th>
            </tr>
          </thead>
          <tbody>
            {sorted.map((group: Group) => (
              <tr key={`${group.domain}\u001f${group.name}\u001f${group.group}`} data-testid="group-row" data-domain={group.domain} data-name={group.name} data-group={group.group} data-dead-letters={group.deadLetters}>
                <th scope="row" data-label="Group">
                  {group.domain} › <span className="mono">{group.name}</span> <span className="muted">({groupLabel(group.group)})</span>
                </th>
                <td className="num" data-label="Members here">
                  {group.members}
                </td>
                <td className="num" data-label="Pending">
                  {group.pending.toLocaleString()}
                </td>
                <td className="num" data-label="In flight">
                  {group.inFlight.toLocaleString()}
                </td>
                <td className="num" data-label="Redelivered">
                  {group.redelivered.toLocaleString()}
                </td>
                <td className={`num${group.deadLetters > 0 ? ' error' : ''}`} data-label="Dead letters">
                  {group.deadLetters.toLocaleString()}
                </td>
                <td data-label="Oldest pending">
                  {group.oldestPendingAt ? (
                    <time dateTime={group.oldestPendingAt} title={group.oldestPendingAt}>
                      {age(group.oldestPendingAt, now)} ago
                    </time>
                  ) : (
                    <span aria-label="none">—</span>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <p className="muted" data-testid="members-note">
        Members here: the consumers connected to this gateway. Workers connected to other gateways of the same store take part in the group too, and are not
        counted. Pending, in flight, redelivered and dead letters are the store's, for every gateway.
      </p>

      <h2 id="dead-letters-title">Dead letters</h2>
      {letters !== undefined && letters.length > 0 && !letters.some((letter) => mayManage(letter.domain)) && (
        <p className="muted" data-testid="no-manage">
          This token may not requeue or discard these (that needs the <code>manage</code> right on the domain).
        </p>
      )}
      {letters === undefined ? (
        <Loading what="dead letters" />
      ) : letters.length === 0 ? (
        <p data-testid="no-dead-letters">No dead letters.</p>
      ) : (
        <table className="grid" data-testid="dead-letter-list" aria-labelledby="dead-letters-title">
          <caption className="visually-hidden">Dead letters, newest first{letters.length === DEAD_LETTER_PAGE ? ` (the newest ${DEAD_LETTER_PAGE})` : ''}</caption>
          <thead>
            <tr>
              <th scope="col">Event</th>
              <th scope="col">Process</th>
              <th scope="col">Group</th>
              <th scope="col" className="num">
                Attempts
              </th>
              <th scope="col">Last error</th>
              <th scope="col">Dead since</th>
              <th scope="col">Action</th>
            </tr>
          </thead>
          <tbody>
            {letters.map((letter) => {
              const key = letterKey(letter);
              const label = `${letter.name} of ${letter.domain} › ${letter.pid}`;
              const asking = confirming?.key === key ? confirming.act : undefined;
              return (
                <tr key={key} data-testid="dead-letter-row" data-event-id={letter.eventId} data-pid={letter.pid}>
                  <th scope="row" data-label="Event">
                    {letter.name}
                  </th>
                  <td data-label="Process">
                    <a href={href({ view: 'process', domain: letter.domain, pid: letter.pid })}>
                      {letter.domain} › <span className="mono">{letter.pid}</span>
                    </a>
                  </td>
                  <td data-label="Group">
                    <span className="mono">{letter.consumes}</span> <span className="muted">({groupLabel(letter.group)})</span>
                  </td>
                  <td className="num" data-label="Attempts" data-testid="attempts">
                    {letter.attempts}
                  </td>
                  <td data-label="Last error" className="error last-error" data-testid="last-error">
                    {letter.lastError}
                  </td>
                  <td data-label="Dead since">
                    <Time iso={letter.at} withDate />
                  </td>
                  <td data-label="Action" className="actions" onKeyDown={onKey}>
                    {!mayManage(letter.domain) ? (
                      <>
                        <span className="muted" aria-hidden="true">
                          —
                        </span>
                        <span className="visually-hidden">none: requeue and discard need the manage right</span>
                      </>
                    ) : asking ? (
                      <span role="group" aria-label={`Confirm: ${asking} ${label}`}>
                        <span>{asking === 'requeue' ? 'Deliver it again?' : 'Drop it from the list?'}</span>{' '}
                        <button type="button" className={asking === 'discard' ? 'danger' : 'primary'} autoFocus disabled={busy} data-testid="confirm" onClick={() => void act(letter, asking, label)}>
                          {asking === 'requeue' ? 'Yes, requeue' : 'Yes, discard'}
                        </button>{' '}
                        <button type="button" disabled={busy} data-testid="keep" onClick={() => setConfirming(undefined)}>
                          Keep
                        </button>
                      </span>
                    ) : (
                      <>
                        <button type="button" aria-label={`Requeue ${label}`} data-testid="requeue" onClick={() => setConfirming({ key, act: 'requeue' })}>
                          Requeue
                        </button>{' '}
                        <button type="button" className="danger" aria-label={`Discard ${label}`} data-testid="discard" onClick={() => setConfirming({ key, act: 'discard' })}>
                          Discard
                        </button>
                      </>
                    )}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      <ErrorNote error={work.error} />
    </section>
  );
}
