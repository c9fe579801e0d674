import { useConnectionState } from '@eventflow/browser/react';

const labels = { connecting: 'connecting…', open: 'open', offline: 'offline, retrying', closed: 'closed' } as const;

/** The client's connection: `data-state` is connecting | open | offline | closed. */
export function ConnectionBadge() {
  const state = useConnectionState();
  return (
    <span className={`badge badge-${state}`} data-testid="connection-state" data-state={state} role="status" aria-live="polite">
      {labels[state]}
    </span>
  );
}
