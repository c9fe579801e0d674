/**
 * Free text a client hands the gateway to store (a handler's error message): JavaScript strings may
 * hold a lone UTF-16 surrogate, which no UTF-8 store holds. MariaDB refuses the statement carrying
 * one (and with it every settle batched alongside, other connections' too); SQLite stores U+FFFD
 * instead, so the text read back is not the text sent. The protocol refuses such text; the client
 * makes what a handler threw well-formed before it sends it.
 */

/** A high surrogate not followed by a low one, or a low one not preceded by a high one. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const LONE_SURROGATES = new RegExp(LONE_SURROGATE.source, 'g');

export const WELL_FORMED_MESSAGE = 'must be well-formed Unicode (it holds a lone UTF-16 surrogate)';

export function isWellFormedText(text: string): boolean {
  return !LONE_SURROGATE.test(text);
}

/** `text` with each lone surrogate replaced by U+FFFD, cut to at most `max` UTF-16 units without splitting a pair. */
export function wellFormedText(text: string, max: number): string {
  const whole = text.replace(LONE_SURROGATES, '\uFFFD');
  if (whole.length <= max) return whole;
  const end = /[\uD800-\uDBFF]/.test(whole.charAt(max - 1)) ? max - 1 : max;
  return whole.slice(0, end);
}
