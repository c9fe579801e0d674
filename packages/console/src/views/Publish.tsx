/**
 * Publish or schedule an event: a form with a JSON editor, checked as the client checks it
 * (assertEventInput) while typing (a field's problem shows once it was edited, or on submit),
 * sent through the outbox, so that it is queued while the gateway is unreachable and listed as
 * pending until the gateway stores it.
 */
import { useMemo, useState, type FormEvent, type ReactNode } from 'react';
import { assertEventInput, generatePid, isEventflowError, type DomainSummary, type JsonObject } from '@eventflow/core';
import { useEventflowClient, useOutbox } from '@eventflow/browser/react';
import { ErrorNote, Time } from '../components.js';
import { href } from '../routes.js';

function check(domain: string, name: string, pid: string, text: string): { data?: JsonObject; problem?: string } {
  let data: unknown;
  try {
    data = JSON.parse(text || '{}');
  } catch (error) {
    return { problem: `data: not valid JSON (${(error as Error).message})` };
  }
  if (data === null || typeof data !== 'object' || Array.isArray(data)) return { problem: 'data: must be a JSON object, e.g. {"amount": 3}' };
  try {
    assertEventInput({ domain, name, pid, data });
  } catch (error) {
    return { problem: isEventflowError(error) ? error.message : String(error) };
  }
  return { data: data as JsonObject };
}

export function Publish({ domains, actions, initialDomain, initialPid }: { domains: DomainSummary[] | undefined; actions: readonly string[]; initialDomain?: string; initialPid?: string }): ReactNode {
  const client = useEventflowClient();
  const outbox = useOutbox();
  const publishable = (domains ?? []).filter((d) => d.actions.includes('publish'));
  const [domain, setDomain] = useState(initialDomain ?? publishable[0]?.domain ?? '');
  const [name, setName] = useState('');
  const [pid, setPid] = useState(initialPid ?? '');
  const [text, setText] = useState('{\n  \n}');
  const [at, setAt] = useState('');
  const [touched, setTouched] = useState(false);
  /** The fields edited so far: a problem shows once its field was (or on submit), not before anything is typed. */
  const [edited, setEdited] = useState<ReadonlySet<string>>(() => new Set([...(initialDomain ? ['domain'] : []), ...(initialPid ? ['pid'] : [])]));
  const edit = (field: string, set: (value: string) => void) => (value: string) => {
    setEdited((fields) => (fields.has(field) ? fields : new Set([...fields, field])));
    set(value);
  };
  const [result, setResult] = useState('');
  const [failure, setFailure] = useState<unknown>(undefined);
  const checked = useMemo(() => check(domain, name, pid, text), [domain, name, pid, text]);
  // A domain without events yet is not listed: the token's rights anywhere decide, and the gateway checks again.
  const known = domains?.find((d) => d.domain === domain);
  const scheduling = at !== '';
  const mayPublish = known ? known.actions.includes(scheduling ? 'schedule' : 'publish') : actions.includes(scheduling ? 'schedule' : 'publish');
  // "event.name: must not be empty", "data: not valid JSON": the field a problem is about.
  const field = /^(?:event\.)?(\w+)/.exec(checked.problem ?? '')?.[1] ?? '';
  const problem = checked.problem && (touched || edited.has(field)) ? checked.problem : undefined;

  const submit = async (event: FormEvent): Promise<void> => {
    event.preventDefault();
    setTouched(true);
    setFailure(undefined);
    if (checked.problem || !checked.data) return;
    const input = { domain, name, pid, data: checked.data };
    try {
      const id = at ? await client.schedule(new Date(at), input) : await client.publish(input);
      setResult(`${at ? 'Scheduled' : 'Published'} ${name} to ${domain} › ${pid} (id ${id}); ${client.state === 'open' ? 'sending' : 'queued until the gateway is reachable'}.`);
    } catch (error) {
      setFailure(error);
    }
  };

  return (
    <section aria-labelledby="publish-title">
      <h1 id="publish-title">Publish or schedule</h1>
      <form className="publish-form" onSubmit={(event) => void submit(event)} noValidate data-testid="publish-form">
        <label htmlFor="publish-domain">Domain</label>
        <input id="publish-domain" list="publish-domains" value={domain} onChange={(e) => edit('domain', setDomain)(e.target.value)} required spellCheck={false} />
        <datalist id="publish-domains">
          {publishable.map((d) => (
            <option key={d.domain} value={d.domain} />
          ))}
        </datalist>
        <label htmlFor="publish-name">Event name</label>
        <input id="publish-name" value={name} onChange={(e) => edit('name', setName)(e.target.value)} required spellCheck={false} />
        <label htmlFor="publish-pid">Pid</label>
        <div className="row">
          <input id="publish-pid" value={pid} onChange={(e) => edit('pid', setPid)(e.target.value)} required spellCheck={false} />
          <button type="button" onClick={() => edit('pid', setPid)(generatePid())}>
            New pid
          </button>
        </div>
        <label htmlFor="publish-data">Data (a JSON object)</label>
        <textarea
          id="publish-data"
          className="mono"
          rows={8}
          value={text}
          onChange={(e) => edit('data', setText)(e.target.value)}
          spellCheck={false}
          aria-invalid={field === 'data' && problem !== undefined}
          aria-describedby="publish-problem"
        />
        <label htmlFor="publish-at">Schedule for (optional: empty publishes now)</label>
        <input id="publish-at" type="datetime-local" step="1" value={at} onChange={(e) => setAt(e.target.value)} />
        <p id="publish-problem" className={problem ? 'error' : 'muted'} aria-live="polite" data-testid="publish-problem">
          {problem ?? (checked.problem ? 'Fill in the domain, the event name and the pid; data is a JSON object.' : 'Valid.')}
        </p>
        {!mayPublish && <p className="error">This token may not {scheduling ? 'schedule' : 'publish'} to {domain}.</p>}
        <button type="submit" className="primary" disabled={checked.problem !== undefined || !mayPublish} data-testid="publish-submit">
          {at ? 'Schedule' : 'Publish'}
        </button>
      </form>
      <p role="status" data-testid="publish-result">
        {result}
      </p>
      <ErrorNote error={failure} />
      <h2>Outbox</h2>
      {outbox.entries.length === 0 ? (
        <p className="muted" data-testid="outbox-empty">
          Nothing pending.
        </p>
      ) : (
        <ul data-testid="outbox-list">
          {outbox.entries.map((entry) => (
            <li key={entry.id} data-testid="outbox-entry" data-id={entry.id}>
              <span className="badge badge-pending">pending</span> {entry.op} {entry.event.name} to{' '}
              <a href={href({ view: 'process', domain: entry.event.domain, pid: entry.event.pid })}>
                {entry.event.domain} › {entry.event.pid}
              </a>{' '}
              queued <Time iso={new Date(entry.queued).toISOString()} />
            </li>
          ))}
        </ul>
      )}
      {outbox.rejections.length > 0 && (
        <>
          <h2>Rejected</h2>
          <ul>
            {outbox.rejections.map(({ entry, error }) => (
              <li key={entry.id} className="error">
                {entry.event.name} to {entry.event.domain} › {entry.event.pid}: {error.code}: {error.message}{' '}
                <button type="button" onClick={() => client.outbox?.dismiss(entry.id)}>
                  Dismiss
                </button>
              </li>
            ))}
          </ul>
        </>
      )}
    </section>
  );
}
