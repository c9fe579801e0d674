/**
 * Asked before connecting to a gateway other than the one that served the console (a link with
 * `?gateway=`): the console would send that server the operator's token and act on its answers,
 * so it connects only once the operator confirms the target; the choice is remembered per target.
 */
import type { ReactNode } from 'react';

export function ChooseGateway({ requested, own, onChoose }: { requested: { url: string; problem?: string }; own: string; onChoose: (url: string, confirmed: boolean) => void }): ReactNode {
  return (
    <main id="main" className="login">
      <section aria-labelledby="gateway-title">
        <h1 id="gateway-title">Connect to another gateway?</h1>
        {requested.problem ? (
          <p className="error" role="alert" data-testid="gateway-problem">
            This link names <code>{requested.url}</code> as the gateway: {requested.problem}.
          </p>
        ) : (
          <>
            <p>
              This link asks the console to connect to <code data-testid="gateway-target">{requested.url}</code>, not to the gateway that served it (
              <code>{own}</code>). The console would send that server your token when you sign in, and show and act on what it answers. Connect only to a
              gateway you know; the console remembers your answer for this target.
            </p>
            <button type="button" className="primary" data-testid="gateway-confirm" onClick={() => onChoose(requested.url, true)}>
              Connect to {requested.url}
            </button>{' '}
          </>
        )}
        <button type="button" data-testid="gateway-own" onClick={() => onChoose(own, false)}>
          Use this console's gateway ({own})
        </button>
      </section>
    </main>
  );
}
