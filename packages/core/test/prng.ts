/** mulberry32 (test-support/prng): the state tests' random eventlogs replay from a seed. */
export { prng } from '@eventflow/test-support/prng';
