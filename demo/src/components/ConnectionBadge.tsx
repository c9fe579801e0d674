import { useConnectionState } from '@eventflow/browser/react';

const labels = { connecting: 'connecting…', open: 'open', closed: 'offline' } as const;

/** The client's connection: `data-state` is connecting | open | closed. */
export function ConnectionBadge() {
  const state = useConnectionState();
  return (
    <span className={`badge badge-${state}`} data-testid="connection-state" data-state={state} role="status" aria-live="polite">
      {labels[state]}
    </span>
  );
}
