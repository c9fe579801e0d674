/**
 * The work features for a browser client (they are opt-in there): `consuming` (consume,
 * removeConsumer) and `waiting` (wait, request), as in
 * `createBrowserClient(url, { features: [consuming, waiting] })`. Without them those methods reject
 * with E_EVENTFLOW_FEATURE_NOT_ENABLED, and the bundle carries none of their code.
 */
export { consuming, iterating, v4Reads, waiting } from '@eventflow/core';
