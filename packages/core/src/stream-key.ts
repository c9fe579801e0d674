/**
 * One map key for a pair of identifiers: (domain, name) for subscriptions and consumers, (domain,
 * pid) for eventlogs and waits. They are joined by U+001F, which no identifier may contain
 * (protocol.ts, as v4's schema), so two different pairs never share a key.
 */
export const streamKey = (a: string, b: string): string => `${a}\u001f${b}`;
