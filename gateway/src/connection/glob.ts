/**
 * Glob matching in bounded time, for the domain patterns of tokens: `*` matches any run of
 * characters (the empty one too), every other character only itself, and a pattern matches the
 * whole text. Patterns come from tokens, so they are hostile input: a backtracking regular
 * expression built from them (`^a.*a.*a.*…b$`) takes time exponential in the number of stars.
 *
 * The pattern is split at its stars into literal segments. The first must be a prefix of the text,
 * the last a suffix (not overlapping the prefix), and the middle ones must occur in order in what
 * lies between, each found at its leftmost position after the previous one. Taking the leftmost
 * occurrence is always right: it leaves the most text for the segments after it, and the star
 * before the next segment absorbs whatever lies between. Nothing is ever retried, so the work is
 * at most (length of the text) × (length of the pattern) character comparisons, O(n·m): for a
 * 64-character domain and a pattern of at most 256 characters (the claim's limit), 16,384.
 */

export interface Glob {
  readonly source: string;
  /** Whether the whole of `text` matches. */
  test(text: string): boolean;
}

interface Compiled {
  /** The pattern had no star: the text must equal `first`. */
  readonly exact: boolean;
  readonly first: string;
  readonly middle: readonly string[];
  readonly last: string;
}

/** Counts character comparisons, for the tests that bound the work. */
interface Counter {
  steps: number;
}

function compile(source: string): Compiled {
  const parts = source.split('*');
  if (parts.length === 1) return { exact: true, first: source, middle: [], last: '' };
  return { exact: false, first: parts[0] ?? '', middle: parts.slice(1, -1).filter((part) => part !== ''), last: parts.at(-1) ?? '' };
}

/** Whether `segment` occurs in `text` at `at`. */
function occursAt(text: string, segment: string, at: number, counter: Counter | undefined): boolean {
  for (let i = 0; i < segment.length; i++) {
    if (counter) counter.steps++;
    if (text.charCodeAt(at + i) !== segment.charCodeAt(i)) return false;
  }
  return true;
}

function matches(glob: Compiled, text: string, counter?: Counter): boolean {
  if (glob.exact) return text === glob.first;
  const { first, middle, last } = glob;
  if (text.length < first.length + last.length) return false;
  if (!occursAt(text, first, 0, counter) || !occursAt(text, last, text.length - last.length, counter)) return false;
  let from = first.length;
  const end = text.length - last.length;
  for (const segment of middle) {
    let found = -1;
    for (let at = from; at + segment.length <= end; at++) {
      if (occursAt(text, segment, at, counter)) {
        found = at;
        break;
      }
    }
    if (found < 0) return false;
    from = found + segment.length;
  }
  return true;
}

export function glob(source: string): Glob {
  const compiled = compile(source);
  return { source, test: (text) => matches(compiled, text) };
}

/** The match and the character comparisons it took (tests). */
export function globSteps(source: string, text: string): { matched: boolean; steps: number } {
  const counter = { steps: 0 };
  const matched = matches(compile(source), text, counter);
  return { matched, steps: counter.steps };
}
