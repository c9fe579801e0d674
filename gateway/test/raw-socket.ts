// Moved to packages/test-support (@eventflow/test-support/raw-socket). This shim keeps
// `./raw-socket.js` imports of not-yet-merged test files working; remove it once no test imports it.
export * from '@eventflow/test-support/raw-socket';
