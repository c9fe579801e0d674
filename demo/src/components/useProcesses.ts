/**
 * The pids of a domain (readDistinctPidByDomain), read again when the connection opens and when an
 * event of a pid not yet listed arrives. The last list is kept in localStorage, so the dashboard
 * can still list processes while it is offline (marked stale).
 */
import { useEffect, useRef, useState } from 'react';
import { useConnectionState, useEventflowClient, useSubscription } from '@eventflow/browser/react';

export interface Processes {
  pids: readonly string[];
  /** True until the list has been read from the gateway on the current connection. */
  stale: boolean;
  error: string | undefined;
}

const storageKey = (domain: string) => `eventflow-demo:pids:${domain}`;

function loadSaved(domain: string): string[] {
  try {
    const saved: unknown = JSON.parse(localStorage.getItem(storageKey(domain)) ?? '[]');
    return Array.isArray(saved) ? saved.filter((pid): pid is string => typeof pid === 'string') : [];
  } catch {
    return [];
  }
}

function save(domain: string, pids: readonly string[]): void {
  try {
    localStorage.setItem(storageKey(domain), JSON.stringify(pids));
  } catch {
    // Storage full or disabled: the list is just not available offline.
  }
}

/** Generated pids end in base-36 milliseconds (`brave-thaelo-mx3fumdr`): newest first by that, others after. */
export function newestFirst(pids: readonly string[]): string[] {
  const time = (pid: string): number => {
    const match = /-([0-9a-z]{6,10})$/.exec(pid);
    return match ? parseInt(match[1] as string, 36) : -1;
  };
  return [...pids].sort((a, b) => time(b) - time(a) || (a < b ? -1 : a > b ? 1 : 0));
}

export function useProcesses(domain: string): Processes {
  const client = useEventflowClient();
  const online = useConnectionState() === 'open';
  const latest = useSubscription(domain, '*', { limit: 1 }).at(-1);
  const [processes, setProcesses] = useState<Processes>(() => ({ pids: newestFirst(loadSaved(domain)), stale: true, error: undefined }));
  const refresh = useRef<() => void>(() => undefined);

  useEffect(() => {
    if (!online) {
      setProcesses((current) => (current.stale ? current : { ...current, stale: true }));
      return;
    }
    let active = true;
    let running = false;
    let again = false;
    // One read at a time; events arriving meanwhile ask for one more read afterwards.
    const read = async (): Promise<void> => {
      if (running) {
        again = true;
        return;
      }
      running = true;
      try {
        do {
          again = false;
          const pids = await client.readDistinctPidByDomain(domain);
          if (!active) return;
          save(domain, pids);
          setProcesses({ pids: newestFirst(pids), stale: false, error: undefined });
        } while (again && active);
      } catch (error) {
        if (active) setProcesses((current) => ({ ...current, stale: true, error: error instanceof Error ? error.message : String(error) }));
      } finally {
        running = false;
      }
    };
    refresh.current = () => void read();
    void read();
    return () => {
      active = false;
      refresh.current = () => undefined;
    };
  }, [client, domain, online]);

  const known = processes.pids;
  useEffect(() => {
    if (latest && !known.includes(latest.pid)) refresh.current();
  }, [latest, known]);

  return processes;
}
