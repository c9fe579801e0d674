/**
 * A process: its timeline (virtualized: only the rows in view are rendered, so 10 000 events paint
 * as fast as 10), each event's JSON and fate, where its time went (queue → handler) and its trace, the state as of the selected event with what it
 * changed highlighted (composeEventlogState over the prefix), the live current state with events
 * still in the outbox marked pending, and its child processes and entity associations.
 */
import { useEffect, useMemo, useRef, useState, type KeyboardEvent, type ReactNode } from 'react';
import { composeEventlogState, type EventFate, type StoredEvent } from '@eventflow/core';
import { useEventflowClient, useEventlogState } from '@eventflow/browser/react';
import { ErrorNote, Loading, Stale, StatusBadge, Time } from '../components.js';
import { href } from '../routes.js';
import { DeliveryChips, DeliveryFacts } from '../deliveries.js';
import { diffState } from '../state-diff.js';
import { useTimeline } from '../timeline.js';
import { RowTiming, TimingFacts, useTraceLink } from '../timings.js';

const ROW = 34;
const VIEW_HEIGHT = 408;
const OVERSCAN = 6;

/**
 * What became of an event: its consume's outcome when one took it; otherwise what it is. An
 * outcome event (`success`, `failed`) reports how its process ended, and an event answering
 * another (`rid`) is a notification: nobody consuming them is normal, not an orphan. An orphan is
 * a published event nobody was there to take, which a command should not be.
 */
function outcomeOf(fate: EventFate | undefined, event: StoredEvent): string {
  if (!fate) return 'unknown';
  if (fate.deadLetter) return 'dead letter';
  if (fate.failed) return 'failed';
  if (fate.success) return 'success';
  if (fate.claimed) return 'in flight';
  if (event.name === 'failed') return 'failure reported';
  if (event.name === 'success') return 'success reported';
  if (fate.orphan) return event.rid ? 'not consumed' : 'orphan';
  return fate.published ? 'no outcome' : 'persisted';
}

const css = (label: string): string => label.replace(/ /g, '-');

export function Process({ domain, pid }: { domain: string; pid: string }): ReactNode {
  const client = useEventflowClient();
  // The live state reads the whole eventlog: it starts once the first timeline page is shown.
  const [livePosition, setLivePosition] = useState(0);
  const timeline = useTimeline(client, domain, pid, livePosition);
  const traceLink = useTraceLink();
  const { events } = timeline;
  const [chosen, setChosen] = useState<number | undefined>(undefined);
  const selected = chosen === undefined ? events.length - 1 : Math.min(chosen, events.length - 1);
  const event = events[selected];
  const fate = event ? timeline.fates.get(event.id) : undefined;
  const lines = useMemo(() => {
    if (selected < 0) return [];
    return diffState(composeEventlogState(events.slice(0, selected)), composeEventlogState(events.slice(0, selected + 1)));
  }, [events, selected]);

  const list = useRef<HTMLDivElement>(null);
  const [scrollTop, setScrollTop] = useState(0);
  const first = Math.max(0, Math.floor(scrollTop / ROW) - OVERSCAN);
  const last = Math.min(events.length, Math.ceil((scrollTop + VIEW_HEIGHT) / ROW) + OVERSCAN);

  const select = (index: number): void => {
    const next = Math.max(0, Math.min(events.length - 1, index));
    setChosen(next);
    const box = list.current;
    if (!box) return;
    // Keeps the selected row in view when the keyboard moves it.
    if (next * ROW < box.scrollTop) box.scrollTop = next * ROW;
    else if ((next + 1) * ROW > box.scrollTop + box.clientHeight) box.scrollTop = (next + 1) * ROW - box.clientHeight;
  };
  const onKey = (key: KeyboardEvent<HTMLDivElement>): void => {
    const page = Math.floor(VIEW_HEIGHT / ROW);
    const moves: Record<string, number> = { ArrowDown: 1, ArrowUp: -1, PageDown: page, PageUp: -page };
    if (key.key in moves) select(selected + (moves[key.key] ?? 0));
    else if (key.key === 'Home') select(0);
    else if (key.key === 'End') select(events.length - 1);
    else return;
    key.preventDefault();
  };

  const rows: ReactNode[] = [];
  for (let index = first; index < last; index++) {
    const row = events[index] as StoredEvent;
    const rowFate = timeline.fates.get(row.id);
    const outcome = outcomeOf(rowFate, row);
    rows.push(
      <div
        key={row.id}
        id={`timeline-${index}`}
        role="option"
        aria-selected={index === selected}
        className={`timeline-row${index === selected ? ' selected' : ''}`}
        style={{ top: index * ROW, height: ROW }}
        data-testid="timeline-row"
        data-name={row.name}
        data-index={index}
        onClick={() => select(index)}
      >
        <span className="mono muted" title={`position ${row.position} in the store`} data-testid="row-number">
          #{index + 1}
        </span>
        <span className="name">{row.name}</span>
        <Time iso={row.timestamp} />
        <span className="mono consumer" title={rowFate?.consumer ? `claimed through gateway ${rowFate.consumer}` : undefined}>
          {rowFate?.consumer ?? '—'}
        </span>
        <DeliveryChips fate={rowFate} />
        <RowTiming event={row} fate={rowFate} />
        <span className={`outcome outcome-${css(outcome)}`} data-testid="row-outcome">
          {outcome}
        </span>
      </div>,
    );
  }

  return (
    <section aria-labelledby="process-title" className="process">
      <h1 id="process-title">
        <a href={href({ view: 'processes', domain })}>{domain}</a> › <span className="mono">{pid}</span>
      </h1>
      <Stale stale={timeline.stale} at={undefined} hasData={events.length > 0} />
      {!timeline.stale && <ErrorNote error={timeline.error} />}
      <p className="muted" aria-live="polite" data-testid="timeline-count">
        {events.length.toLocaleString()} of {Math.max(timeline.count, events.length).toLocaleString()} events{timeline.complete ? '' : ' (loading…)'}
      </p>
      <div className="process-grid">
        <div>
          <h2 id="timeline-title">Timeline</h2>
          {events.length === 0 ? (
            timeline.complete ? <p>No events.</p> : <Loading what="the timeline" />
          ) : (
            <div
              ref={list}
              className="timeline"
              role="listbox"
              tabIndex={0}
              aria-labelledby="timeline-title"
              aria-activedescendant={`timeline-${selected}`}
              style={{ height: VIEW_HEIGHT }}
              onScroll={(scroll) => setScrollTop(scroll.currentTarget.scrollTop)}
              onKeyDown={onKey}
              data-testid="timeline"
            >
              <div style={{ height: events.length * ROW, position: 'relative' }}>{rows}</div>
            </div>
          )}
          <Associations children={timeline.children} entities={timeline.entities} />
        </div>
        <div>
          {event && (
            <>
              <h2>
                Event <span className="mono">{event.name}</span> <span className="muted">#{selected + 1} of this process (position {event.position})</span>
              </h2>
              <dl className="facts" data-testid="event-fate">
                <dt>Time</dt>
                <dd>
                  <Time iso={event.timestamp} withDate />
                </dd>
                {/* v4's `consumer` column records the gateway that handed the event out, not the worker's connection. */}
                <dt>Claimed through gateway</dt>
                <dd className="mono" data-testid="claimed-by">
                  {fate?.consumer ?? '—'}
                </dd>
                <dt>Outcome</dt>
                <dd>
                  <StatusBadge status={outcomeOf(fate, event)} />
                </dd>
                <DeliveryFacts fate={fate} />
                <TimingFacts event={event} fate={fate} traceLink={traceLink} />
                {fate?.deadLetter && (
                  <>
                    <dt>Dead letter</dt>
                    <dd>
                      after {fate.deadLetter.attempts} attempts: {fate.deadLetter.reason}
                    </dd>
                  </>
                )}
                {fate?.orphan && (
                  <>
                    <dt>Orphan</dt>
                    <dd>nobody took it (<Time iso={fate.orphan} />)</dd>
                  </>
                )}
              </dl>
              <details open>
                <summary>Event JSON</summary>
                <pre className="json" data-testid="event-json">
                  {JSON.stringify(event, null, 2)}
                </pre>
              </details>
              <h2 id="asof-title">State as of this event</h2>
              <ul className="state-lines" aria-labelledby="asof-title" data-testid="state-as-of">
                {lines.map((line) => (
                  <li key={line.path} className={line.change ? `change-${line.change}` : undefined} data-change={line.change ?? ''}>
                    <span className="mono">{line.path}</span> = <span className="mono">{line.value}</span>
                    {line.change && <span className="visually-hidden"> ({line.change} by this event)</span>}
                  </li>
                ))}
              </ul>
            </>
          )}
          {(events.length > 0 || timeline.complete || timeline.stale) && <CurrentState domain={domain} pid={pid} onPosition={setLivePosition} />}
        </div>
      </div>
    </section>
  );
}

/** The live composed state, with outbox entries applied and marked pending; reports its position so the timeline follows. */
function CurrentState({ domain, pid, onPosition }: { domain: string; pid: string; onPosition: (position: number) => void }): ReactNode {
  const live = useEventlogState(domain, pid);
  useEffect(() => onPosition(live.position), [live.position, onPosition]);
  return (
    <>
      <h2>Current state</h2>
      {live.pending.length > 0 && (
        <p className="pending" data-testid="state-pending" role="status">
          {live.pending.length} event(s) pending in the outbox, shown applied.
        </p>
      )}
      {live.stale && !live.loading && <p className="stale">Stale: may be behind the gateway.</p>}
      <pre className="json" data-testid="current-state">
        {JSON.stringify(live.state, null, 2)}
      </pre>
    </>
  );
}

function Associations({ children, entities }: { children: Array<{ domain: string; cpid: string }>; entities: Array<{ eid: string }> }): ReactNode {
  if (children.length === 0 && entities.length === 0) return null;
  const uniqueChildren = [...new Map(children.map((child) => [`${child.domain}\u001f${child.cpid}`, child])).values()];
  const uniqueEntities = [...new Set(entities.map((entity) => entity.eid))];
  return (
    <div data-testid="associations">
      {uniqueChildren.length > 0 && (
        <>
          <h2>Child processes</h2>
          <ul>
            {uniqueChildren.map((child) => (
              <li key={`${child.domain}/${child.cpid}`}>
                <a href={href({ view: 'process', domain: child.domain, pid: child.cpid })}>
                  {child.domain} › <span className="mono">{child.cpid}</span>
                </a>
              </li>
            ))}
          </ul>
        </>
      )}
      {uniqueEntities.length > 0 && (
        <>
          <h2>Entities</h2>
          <ul>
            {uniqueEntities.map((eid) => (
              <li key={eid} className="mono">
                {eid}
              </li>
            ))}
          </ul>
        </>
      )}
    </div>
  );
}
