/**
 * A composed state as lines of `path = value` (leaves of the JSON tree), and which of them an
 * event changed: what the Process view highlights when it travels through the timeline.
 */
export interface StateLine {
  path: string;
  value: string;
  change: 'added' | 'changed' | 'removed' | undefined;
}

function leaves(value: unknown, path: string, into: Map<string, string>): Map<string, string> {
  if (value !== null && typeof value === 'object' && Object.keys(value).length > 0) {
    for (const [key, child] of Object.entries(value)) leaves(child, path ? `${path}.${key}` : key, into);
  } else {
    into.set(path || '(state)', JSON.stringify(value));
  }
  return into;
}

/** The lines of `after`, each marked with how it differs from `before`, then the lines `before` had and `after` lost. */
export function diffState(before: unknown, after: unknown): StateLine[] {
  const old = leaves(before, '', new Map());
  const now = leaves(after, '', new Map());
  const lines: StateLine[] = [];
  for (const [path, value] of now) {
    const previous = old.get(path);
    lines.push({ path, value, change: previous === undefined ? 'added' : previous === value ? undefined : 'changed' });
  }
  for (const [path, value] of old) if (!now.has(path)) lines.push({ path, value, change: 'removed' });
  return lines;
}
