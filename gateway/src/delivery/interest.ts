import { streamKey } from '@eventflow/core';
import type { Router } from '../router/router.js';

/**
 * This gateway's registrations (subscriptions, consumers, waited names) per (domain, name): the
 * router is told when the first arrives and when the last leaves, so that a hub mesh routes here
 * only what someone here takes.
 */
export class Interest {
  readonly #router: Pick<Router, 'setInterest'>;
  readonly #counts = new Map<string, number>();

  constructor(router: Pick<Router, 'setInterest'>) {
    this.#router = router;
  }

  change(domain: string, name: string, delta: number): void {
    const key = streamKey(domain, name);
    const before = this.#counts.get(key) ?? 0;
    const after = before + delta;
    if (after <= 0) this.#counts.delete(key);
    else this.#counts.set(key, after);
    if (before === 0 && after > 0) this.#router.setInterest(domain, name, true);
    else if (before > 0 && after <= 0) this.#router.setInterest(domain, name, false);
  }
}
