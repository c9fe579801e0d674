/**
 * The v4 reference fold (eventflow-v4.md §8.12), kept in bench/ where it is the baseline of
 * bench/compose.mjs; tests compare core against it through this module, by package name.
 */
export { assign, clone, composeEventlogStateV4, merge } from '@eventflow/bench/v4-compose';
