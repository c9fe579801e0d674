/** Small display helpers shared by the panels. */

/** `HH:MM:SS.mmm` of an ISO timestamp, in local time. */
export function clockTime(timestamp: string): string {
  const date = new Date(timestamp);
  if (Number.isNaN(date.getTime())) return timestamp;
  const pad = (n: number, width = 2) => String(n).padStart(width, '0');
  return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}.${pad(date.getMilliseconds(), 3)}`;
}

/** One-line JSON, cut to `max` characters. */
export function preview(value: unknown, max = 80): string {
  const text = JSON.stringify(value) ?? '';
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** A CSS class per kind of event name, for colour. */
export function nameClass(name: string): string {
  if (name === 'success') return 'name-success';
  if (name === 'failed') return 'name-failed';
  return 'name-other';
}
