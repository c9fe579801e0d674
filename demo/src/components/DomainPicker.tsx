import { useState, type FormEvent } from 'react';

const identifier = /^[\x20-\x7e]{1,64}$/;

/** A domain name field; the dashboard switches when the form is submitted with a valid name. */
export function DomainPicker({ domain, onChange }: { domain: string; onChange: (domain: string) => void }) {
  const [draft, setDraft] = useState(domain);
  const valid = identifier.test(draft.trim());
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const next = draft.trim();
    if (identifier.test(next) && next !== domain) onChange(next);
  };
  return (
    <form className="domain" onSubmit={submit}>
      <label>
        domain{' '}
        <input data-testid="domain-input" value={draft} onChange={(event) => setDraft(event.target.value)} aria-invalid={!valid} list="domains" size={12} />
      </label>
      <datalist id="domains">
        <option value="orders" />
      </datalist>
      <button type="submit" disabled={!valid || draft.trim() === domain}>
        show
      </button>
    </form>
  );
}
