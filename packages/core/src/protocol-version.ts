/**
 * The protocol version sent in the handshake. Apart from protocol.ts so that the client, which
 * needs only this value from it, does not pull the zod schemas into a browser bundle.
 */
export const PROTOCOL_VERSION = 1;
