/**
 * native-websocket.ts in browser builds (the package's "browser" field): the platform's
 * WebSocket, read where it is used rather than probed at import as isows does (about 70 B gzip
 * less in the browser client, and importing the client without a WebSocket, as server rendering
 * does, no longer throws).
 */
export const WebSocket = globalThis.WebSocket;
