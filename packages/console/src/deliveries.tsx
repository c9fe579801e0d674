/**
 * An event's consumer-group deliveries (the fate's `deliveries`, from the gateway's ledger) as the
 * Process view shows them: compactly in a timeline row (attempts, each named group's outcome),
 * in full beside the selected event.
 */
import type { ReactNode } from 'react';
import type { EventDelivery, EventFate } from '@eventflow/core';

/** The most deliveries any group made of the event (a dead letter's count included). */
export function attemptsOf(fate: EventFate | undefined): number {
  if (!fate) return 0;
  return Math.max(fate.deadLetter?.attempts ?? 0, ...(fate.deliveries ?? []).map((delivery) => delivery.attempts));
}

const groupName = (delivery: EventDelivery): string => (delivery.group === '' ? 'default group' : `group ${delivery.group}`);
const outcomeOf = (delivery: EventDelivery): string => delivery.outcome ?? (delivery.attempts > 0 ? 'unsettled' : 'pending');
const attemptsText = (count: number): string => `${count} attempt${count === 1 ? '' : 's'}`;

/** For a timeline row: ×N when redelivered or dead, then one chip per named group with its outcome. */
export function DeliveryChips({ fate }: { fate: EventFate | undefined }): ReactNode {
  const attempts = attemptsOf(fate);
  const named = (fate?.deliveries ?? []).filter((delivery) => delivery.group !== '');
  return (
    <span className="deliveries" data-testid="row-deliveries">
      {(attempts > 1 || fate?.deadLetter) && (
        <span className="attempts" aria-label={attemptsText(attempts)} data-testid="row-attempts">
          ×{attempts}
        </span>
      )}
      {named.map((delivery) => {
        const outcome = outcomeOf(delivery);
        const label = `${groupName(delivery)}: ${outcome}, ${attemptsText(delivery.attempts)}`;
        return (
          <span key={`${delivery.name}/${delivery.group}`} className={`group-chip outcome-${outcome}`} title={label} aria-label={label}>
            {delivery.group}
          </span>
        );
      })}
    </span>
  );
}

/** For the selected event's facts: each group's attempts, outcome and last error. */
export function DeliveryFacts({ fate }: { fate: EventFate | undefined }): ReactNode {
  const deliveries = fate?.deliveries ?? [];
  if (deliveries.length === 0) return null;
  return (
    <>
      <dt>Deliveries</dt>
      <dd>
        <ul className="delivery-list" data-testid="event-deliveries">
          {deliveries.map((delivery) => (
            <li key={`${delivery.name}/${delivery.group}`} data-group={delivery.group}>
              <span className="mono">{delivery.group === '' ? 'default group' : `${delivery.group} (${delivery.name})`}</span>:{' '}
              <span className={`outcome-${outcomeOf(delivery)}`}>{outcomeOf(delivery)}</span> after {attemptsText(delivery.attempts)}
              {delivery.lastError && <span className="muted"> — {delivery.lastError}</span>}
            </li>
          ))}
        </ul>
      </dd>
    </>
  );
}
