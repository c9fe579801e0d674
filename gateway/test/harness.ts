// Moved to packages/test-support (@eventflow/test-support/harness, /wait). This shim keeps
// `./harness.js` imports of not-yet-merged test files working; remove it once no test imports it.
export * from '@eventflow/test-support/harness';
export { eventually } from '@eventflow/test-support/wait';
