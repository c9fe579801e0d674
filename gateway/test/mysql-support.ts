// Moved to packages/test-support (@eventflow/test-support/mysql). This shim keeps
// `./mysql-support.js` imports of not-yet-merged test files working; remove it once no test imports it.
export * from '@eventflow/test-support/mysql';
