/** The token form (EVENTFLOW_AUTH=jwt): the token is kept in sessionStorage, for this tab only. */
import { useState, type ReactNode } from 'react';

export function Login({ onToken, reason, signedIn }: { onToken: (token: string | undefined) => void; reason: string | undefined; signedIn: boolean }): ReactNode {
  const [token, setToken] = useState('');
  return (
    <section aria-labelledby="login-title" className="login">
      <h1 id="login-title">Sign in with a token</h1>
      {reason && (
        <p className="error" role="alert">
          {reason}
        </p>
      )}
      <p>This gateway checks tokens (EVENTFLOW_AUTH=jwt). Paste a JWT; the console shows what its <code>eventflow</code> claim allows. It is kept for this tab only.</p>
      <form
        onSubmit={(event) => {
          event.preventDefault();
          if (token.trim()) onToken(token.trim());
        }}
      >
        <label htmlFor="token-input">Token</label>
        <input id="token-input" type="password" autoComplete="off" value={token} onChange={(event) => setToken(event.target.value)} data-testid="token-input" />
        <button type="submit" className="primary" data-testid="token-submit">
          Sign in
        </button>
        {signedIn && (
          <button type="button" onClick={() => onToken(undefined)}>
            Sign out
          </button>
        )}
      </form>
    </section>
  );
}
