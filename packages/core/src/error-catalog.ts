import type { ErrorCode } from './errors.js';

/**
 * Every error a user of eventflow can meet, in one place. Codes are stable API: callers branch on
 * `error.code`, never on message text. Each entry says what the user should do about it.
 */
export const errorCodes: { readonly [C in ErrorCode]: string } = {
  E_EVENTFLOW_INVALID_INPUT:
    'An argument or frame field is invalid; the message names the field. Fix the value and retry. Also an event whose data holds more values or levels than the gateway allows (details.limit: EVENTFLOW_MAX_DATA_KEYS or EVENTFLOW_MAX_DATA_DEPTH, details.path: where): make the event smaller or split it.',
  E_EVENTFLOW_INVALID_FRAME:
    'The gateway could not parse a frame (not JSON, or not an object with a known "type"). Use a client that speaks this protocol version.',
  E_EVENTFLOW_UNKNOWN_OPERATION:
    'The request names an operation this gateway does not know. Upgrade the gateway or the client so that both speak the same protocol.',
  E_EVENTFLOW_PROTOCOL_VERSION:
    'Client and gateway speak different protocol versions. Upgrade the older side.',
  E_EVENTFLOW_HANDSHAKE_REQUIRED:
    'A request arrived before the "hello" frame. Send "hello" first (the clients do this for you).',
  E_EVENTFLOW_EVENT_NOT_FOUND:
    'No event has this id (it may have been deleted). Check the id.',
  E_EVENTFLOW_DUPLICATE_ID:
    'An event with this id already exists with different content. Use a new id, or omit it and let the client generate one.',
  E_EVENTFLOW_REFERENCE_NOT_FOUND:
    'The event refers (rid) to an event that does not exist. Publish the referenced event first or drop rid.',
  E_EVENTFLOW_INVALID_DATE:
    'A date could not be parsed. Pass a Date, epoch milliseconds or an ISO-8601 string with an offset.',
  E_EVENTFLOW_UNKNOWN_DELIVERY:
    'The delivery was already settled, expired or belongs to another connection. Nothing to do; the gateway decides its fate. From context.retry(): it was called after the handler returned, when its outcome was reported already; call it before the handler resolves.',
  E_EVENTFLOW_NO_CONSUMER:
    'No consumer group takes events of this (domain, name), so a request would wait for an outcome nobody produces; nothing was stored. Register a consumer first (a group exists from its first registration), or pass requireConsumer: false.',
  E_EVENTFLOW_WAIT_TIMEOUT:
    'No matching outcome event arrived within the timeout. Raise the timeout or check that a consumer handles the process. From request(): the event was published (details.published is its id); wait() for its outcome again rather than publishing it anew.',
  E_EVENTFLOW_REQUEST_TIMEOUT:
    'The gateway did not answer in time. Check that it is running and reachable; the request may or may not have taken effect (a publish, persist, schedule or request() names its event, in the message and `details.id`: send it again with that id, never a new one, and it is stored once).',
  E_EVENTFLOW_OFFLINE:
    'The client had no connection to the gateway while the request waited to be sent (within its timeout), or had never reached the gateway and its last attempt failed (the message names the URL and the cause), so the gateway never received it and nothing was done. Check the URL, the network and that the gateway runs; retry, or give the call a longer timeout (requestTimeout, options.timeout) to ride out short outages.',
  E_EVENTFLOW_ABORTED: 'The operation was aborted by its AbortSignal. A write (publish, persist, schedule, request()) names its event in the message: it may be stored, so send it again with that id, never a new one. From request() once its event was stored, details.published is that event\'s id.',
  E_EVENTFLOW_CLIENT_CLOSED: 'The client was closed. Create a new client to continue.',
  E_EVENTFLOW_CONNECTION_FAILED:
    'The WebSocket could not be opened. Check the URL and that the gateway runs; the client keeps retrying with backoff.',
  E_EVENTFLOW_CONSUMER_NAME_UNMAPPABLE:
    'This event name cannot be turned into an onEventName method name. Rename the event or consume it with a plain callback.',
  E_EVENTFLOW_CONSUMER_HANDLER_MISSING:
    'No onEventName method handles this event, so it was marked failed. Add the method or narrow the consumed names.',
  E_EVENTFLOW_CONSUMER_FAILED:
    "A consumer handler threw; the event was marked failed. See `cause`. From request(): the requested event's consume ended failed (the handler threw, or it became a dead letter after its last attempt); details carry the handler's message (error) and the attempt. Fix the cause and publish again, or requeue the dead letter.",
  E_EVENTFLOW_STORE_FAILED:
    "The gateway could not read or write its store. Check the gateway logs and its database (its disk, its server). On a write (publish, persist, schedule), details.stored says what became of the event: false (not stored) or 'unknown' (the store failed while committing, so it may be stored); with details.retryable the clients have already sent the same request again, with the same event id, until their timeout. Send it again with the SAME id (the store answers a retry of a stored event with that event): never under a new id, which would store it twice.",
  E_EVENTFLOW_INTERNAL: 'Unexpected gateway failure. Check the gateway logs; the connection stays usable.',
  E_EVENTFLOW_CONFIG: 'A configuration value is invalid; the message names the variable. Fix it and restart.',
  E_EVENTFLOW_LISTEN_FAILED:
    'The gateway or hub cannot listen on its address: the port is in use or needs privileges, or the host is not an address of this machine. Stop the other process or change the variable the message names, and restart.',
  E_EVENTFLOW_STORE_UNAVAILABLE:
    'The store cannot be opened or reached at start: the message names the SQLite path, or the MySQL host, port, database and user, and the variable to change. Fix it and restart.',
  E_EVENTFLOW_STORE_LOCKED:
    'Another gateway holds the SQLite database file (the message names the file and that gateway, its process and host): one gateway per file, since gateways on one SQLite file would not route to each other. Stop the other gateway, or set EVENTFLOW_SQLITE_PATH to another file; for several gateways on one store use EVENTFLOW_STORE=mysql. A gateway that died (even by kill -9) holds nothing: restart it.',
  E_EVENTFLOW_STORE_UNSUPPORTED:
    "The MySQL/MariaDB server answers, but a setting of it would refuse the gateway's writes, so the gateway does not start (instead of failing every publish): the message names the setting, its value and how to change it. Checked: a binary log in STATEMENT format (binlog_format), which InnoDB refuses for the gateway's READ COMMITTED writes; set binlog_format to ROW (or MIXED) on the server and in its configuration, and restart.",
  E_EVENTFLOW_LIMIT_EXCEEDED:
    'The connection reached a gateway limit (details.limit names it, details.value is its value): too many unanswered requests, or too many subscriptions, consumers and waits; or (in the JSON body of an HTTP 503 refusing the WebSocket upgrade) the gateway holds EVENTFLOW_MAX_CONNECTIONS connections. Nothing was done. Wait for answers or remove registrations, spread the work over more connections, or raise the limit on the gateway.',
  E_EVENTFLOW_RATE_LIMITED:
    'The connection publishes faster than the gateway allows (EVENTFLOW_MAX_PUBLISH_RATE). Nothing was stored. Retry after details.retryAfterMs, slow down, or raise the limit on the gateway.',
  E_EVENTFLOW_UNAUTHORIZED:
    'The gateway needs credentials and got none or invalid ones. Pass valid credentials to the client and reconnect.',
  E_EVENTFLOW_FORBIDDEN:
    'The credentials are valid but do not allow this operation on this domain. Ask for the permission, or use credentials that have it.',
  E_EVENTFLOW_VERSION_CONFLICT:
    'The write expected a different current version than the stored one (someone else wrote first). Read the current state, reapply the change and retry.',
  E_EVENTFLOW_OUTBOX_FULL:
    'The browser outbox holds its size budget of unsent events (details.maxBytes; createOutbox({ maxBytes })); nothing was queued. Wait until the client is connected and the outbox drains, drop entries (client.outbox.drop), or raise maxBytes.',
  E_EVENTFLOW_OUTBOX_EXPIRED:
    'An event waited in the browser outbox longer than its maximum age (details.maxAge; createOutbox({ maxAge })) and was not sent. Publish it again if it still makes sense, or raise maxAge.',
  E_EVENTFLOW_FEATURE_NOT_ENABLED:
    "The client was created without the feature this method needs (details.feature): `consuming` for consume and removeConsumer, `waiting` for wait and request, `v4Reads` for readEventlogByTimestamp, readEventlogFilteredByNames, readEventlogByChildProcess, readEventlogByEid, readEventlogByDomainAndEid and the two persist…Association, `iterating` for events() (and, on a browser client, eventlogStates(), with the iterating of '@eventflow/browser/work'). Browser clients have none unless given: import them from '@eventflow/browser/work' and pass them, e.g. createBrowserClient(url, { features: [consuming, waiting] }).",
  E_EVENTFLOW_GROUP_IN_USE:
    'deleteGroup: the group has members registered on this gateway (details.members). Nothing was deleted. Stop the workers of the group (or remove their consumers), then delete it. Members registered on other gateways are not counted: the delete ends them (E_EVENTFLOW_GROUP_DELETED).',
  E_EVENTFLOW_GROUP_DELETED:
    "The consumer's group (details: domain, name, group) was deleted (deleteGroup, `eventflow group-delete`) while the consumer was registered on another gateway, so that gateway ended it: nothing more is delivered to it, its open deliveries were revoked, and it is not registered again on reconnect (the client reports this through onError). To go on consuming, register the consumer again (consume): that starts a new group from now, without the events published since the delete. If the delete was not meant, ask the operator who deleted it.",
} as const;

/**
 * The codes of the v4-compatible wing (gateway/src/v4): its certificate management (eventflow-v4.md §10.3, §10.4;
 * v4's own strings, so that logs and callers branch as with v4's components) and the hub's TLS identity check.
 * They are raised as the gateway's CertificateError, not as EventflowError, so they are not ErrorCodes.
 */
export const certificateErrorCodes = {
  E_EVENTFLOW_CERTIFICATES_MISSING_CONFIGURATION:
    'CERT_PASS_ENCRYPTION_KEY (env EVENTFLOW_CERT_PASS_ENCRYPTION_KEY) is not set. Set it to the value every hub and spoke sharing the database uses.',
  E_EVENTFLOW_CERTIFICATES_INVALID_ID:
    'revoke(id) was given an id that is neither the root, this process\'s intermediate nor its leaf.',
  E_EVENTFLOW_CERTIFICATES_DECRYPT:
    'A stored key or passphrase could not be decrypted (GCM authentication failed): CERT_PASS_ENCRYPTION_KEY or the CERT_PASS_* settings differ from the ones that wrote the row.',
  E_EVENTFLOW_INVALID_HOSTNAME:
    'A TLS client asked (SNI) for a hub id other than this hub\'s; the handshake was aborted. The client must send SNI = the hub id.',
  E_EVENTFLOW_DB_CERTIFICATE_READ: 'Reading a certificate row failed; see `cause`.',
  E_EVENTFLOW_DB_CERTIFICATE_NOT_FOUND: 'There is no active certificate row with this id.',
  E_EVENTFLOW_DB_CERTIFICATE_PERSIST: 'Inserting a certificate row failed (other than a duplicate); see `cause`.',
  E_EVENTFLOW_DB_CERTIFICATE_REVOKE: 'Revoking a certificate row failed; see `cause`.',
  E_EVENTFLOW_DB_CERTIFICATE_REVOKE_PAST_VALIDITY: 'Revoking expired certificate rows failed; see `cause`.',
  E_EVENTFLOW_DB_ADVISORY_LOCK_NULL_RESULT: 'GET_LOCK returned NULL (the server reported an error). Retry; check the database.',
} as const;

/**
 * The codes of the `eventflow` command line (@eventflow/node, commands.ts): a command that found nothing to
 * act on. It still prints its JSON (`{"deleted":false}`, `{}`) and exits 1, like the CLI's other errors.
 * Raised as the CLI's NotFound, not as EventflowError, so they are not ErrorCodes: no client bundle carries them.
 */
export const cliErrorCodes = {
  E_EVENTFLOW_GROUP_NOT_FOUND:
    'eventflow group-delete: no consumer group has this domain, name and group; nothing was deleted. "eventflow groups <domain>" lists them: pass its domain, its consumed name (the event name, or * for a group of every name) and its group (none for the default group).',
  E_EVENTFLOW_DEAD_LETTER_NOT_FOUND:
    'eventflow dead-letter-requeue or dead-letter-discard: that group has no dead letter of this event id (never one, or already requeued or discarded); nothing was changed. "eventflow dead-letters <domain>" lists them: pass its eventId, domain, consumes and group.',
  E_EVENTFLOW_PROCESS_NOT_FOUND:
    'eventflow read or state: the process has no events (a process exists from its first event), so there is nothing to read or compose; stdout holds nothing (read) or {} (state). Check the domain and the pid, e.g. with "eventflow tail <domain>".',
} as const;

/** The codes of v4's wire codec (gateway/src/v4/codec.ts), raised as its WireError. */
export const wireErrorCodes = {
  E_EVENTFLOW_WIRE_UNIT:
    'A record unit to send contains 0x1E or 0x1F, the v4 wire\'s separators, so it cannot be encoded; nothing was sent. Use domains, names, ids and pids without those bytes.',
  E_EVENTFLOW_WIRE_OVERSIZE:
    'The other side sent a record longer than the limit (64 KiB by default) without a terminator; that connection was dropped. Check what the peer sends; it may reconnect.',
  E_EVENTFLOW_WIRE_READY_SIGNAL:
    'The first byte from a hub was not STX (0x02): the address is not a v4 hub, or it speaks another protocol. Check the hub address.',
} as const;

/** WebSocket close codes the gateway uses, with what each means. */
export const closeCodes = {
  1000: 'Normal close, by the client (close()).',
  1001: 'Gateway going away (shutdown); the client reconnects with backoff.',
  1002: 'Protocol version mismatch in the handshake; upgrade the older side.',
  1009: 'A frame exceeded the gateway frame limit (EVENTFLOW_MAX_FRAME_BYTES, default 1 MiB).',
  1011: 'The gateway failed (store unavailable, or a subscription replay failed); the client reconnects and resumes.',
  1013: 'Try again later (EVENTFLOW_AUTH=jwt): the gateway holds EVENTFLOW_MAX_UNAUTHENTICATED_CONNECTIONS connections without a valid token and closed this one, the oldest, to make room; the client reconnects and should send its token in "hello" at once.',
  4000: 'Handshake timeout: no "hello" (gateway) or no "welcome" (client) in time.',
  4001: 'Heartbeat timeout: the client got no answer to its ping and reconnects.',
  4401: 'Unauthorized: the token in "hello" is invalid, forged or expired, or the connection\'s token expired; the client reconnects with a fresh token (ClientOptions.token).',
  4408: 'Authentication timeout (EVENTFLOW_AUTH=jwt without EVENTFLOW_AUTH_ANONYMOUS rights): no valid token within EVENTFLOW_AUTH_TIMEOUT_MS (default 10 s) of connecting; reconnect with a token (ClientOptions.token).',
  4008: 'The client could not keep up (EVENTFLOW_MAX_BUFFERED_BYTES unsent); it reconnects and resumes from its positions.',
};

export type CloseCode = keyof typeof closeCodes;

