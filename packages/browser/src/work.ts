/**
 * The opt-in features of a browser client: the work features `consuming` (consume,
 * removeConsumer) and `waiting` (wait, request), as in
 * `createBrowserClient(url, { features: [consuming, waiting] })`, and `v4Reads` (v4's reads by
 * timestamp, names, child process and entity id; its two associations) and `iterating`
 * (events(), and eventlogStates() of a browser client: this one, not core's). Without them those methods reject (events() throws) with
 * E_EVENTFLOW_FEATURE_NOT_ENABLED, and the bundle carries none of their code.
 */
export { consuming, v4Reads, waiting } from '@eventflow/core';
export { iterating } from './iterating.js';
