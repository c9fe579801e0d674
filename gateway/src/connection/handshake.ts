/** The `hello` a connection starts with: the protocol version and the token's rights, then `welcome`. */
import { EventflowError, type ServerFrame } from '@eventflow/core';
import { PROTOCOL_VERSION } from '@eventflow/core/protocol';
import type { Logger } from '../log.js';
import type { Authenticator, Authorization } from './auth.js';
import type { SessionContext } from './context.js';

/** Why a hello is refused: the error frame, then the close. */
export interface HelloRefusal {
  readonly code: string;
  readonly message: string;
  readonly closeCode: number;
  readonly closeReason: string;
}

/** A client speaking another protocol version is refused at once (before any token is looked at). */
export function protocolRefusal(protocol: number): HelloRefusal | undefined {
  if (protocol === PROTOCOL_VERSION) return undefined;
  return {
    code: 'E_EVENTFLOW_PROTOCOL_VERSION',
    message: `this gateway speaks protocol ${PROTOCOL_VERSION}, the client ${protocol}; upgrade the older side`,
    closeCode: 1002,
    closeReason: 'protocol version mismatch',
  };
}

/** The rights a hello's token gives (the anonymous ones without a token or authentication), or why it is refused. */
export async function helloRights(auth: Authenticator, token: string | undefined, client: string | undefined, log: Logger): Promise<Authorization | HelloRefusal> {
  if (token === undefined || auth.mode !== 'jwt') return auth.anonymous;
  try {
    return await auth.verify(token);
  } catch (error) {
    const message = error instanceof EventflowError ? error.message : 'the token could not be verified';
    log.info('handshake refused: bad token', { client, reason: message });
    return { code: 'E_EVENTFLOW_UNAUTHORIZED', message, closeCode: 4401, closeReason: 'unauthorized' };
  }
}

export const isRefusal = (value: Authorization | HelloRefusal): value is HelloRefusal => 'closeCode' in value;

/** What the gateway tells a connection once its hello is accepted. */
export function welcomeFrame(context: SessionContext, connection: string, head: number): ServerFrame {
  return {
    type: 'welcome',
    protocol: PROTOCOL_VERSION,
    connection,
    gateway: context.gatewayId,
    head,
    limits: { maxFrameBytes: context.maxFrameBytes, ...context.announced },
    waitsInOrder: true,
  };
}
