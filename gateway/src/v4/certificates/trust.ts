/**
 * Which roots to trust (eventflow-v4.md §11 D20). v4 trusts exactly the root it has cached, so
 * when processes rotate the root independently the mesh partitions until restarts. We trust a
 * bundle instead: the active root plus every earlier root that is still within its validity and
 * was retired by a rotation rather than revoked on purpose.
 */
import type { CertificateHistoryRow } from './store.js';

/** A certificate counts as expired this long before its notAfter (v4: 10 minutes). */
export const EXPIRY_MARGIN_MS = 10 * 60_000;
/** Tolerance for clock differences between the revoking process and the database. */
const ROTATION_SLACK_MS = 5 * 60_000;

/**
 * A revocation is a rotation artefact when it happened inside the rotation window of some root's
 * notAfter: the normal expiry rotation, and also v4's race where a second process, rotating its own
 * cached root, revokes the root another process has just created. Any other revocation (an
 * operator's revoke) withdraws trust at once.
 */
function isRotation(revoked: Date, roots: readonly CertificateHistoryRow[]): boolean {
  return roots.some((root) => Math.abs(root.validity.getTime() - revoked.getTime()) <= EXPIRY_MARGIN_MS + ROTATION_SLACK_MS);
}

/** The trust bundle: the active root first, then retired roots still valid at `now`, newest first. */
export function selectTrustedRoots(history: readonly CertificateHistoryRow[], now: number): string[] {
  const active = history.filter((row) => row.version === 0 && row.revoked === null);
  const retired = history
    .filter((row) => row.revoked !== null && row.validity.getTime() > now && isRotation(row.revoked, history))
    .sort((a, b) => b.validity.getTime() - a.validity.getTime());
  return [...new Set([...active, ...retired].map((row) => row.cert))];
}
