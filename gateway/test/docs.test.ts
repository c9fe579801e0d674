/**
 * The repository's Markdown, as a reader follows it: every relative link reaches a file and every
 * anchor a heading (GitHub's slugs), and no command in it fetches a package name we do not own
 * (none is published yet: a bare `npx eventflow` runs an unrelated registry package).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from './cli/support.js';

const markdown = execFileSync('git', ['ls-files', '*.md'], { cwd: repoRoot, encoding: 'utf8' }).split('\n').filter(Boolean);

/** The text outside fenced code blocks, line by line (code shows commands, not links). */
function prose(text: string): string[] {
  let fenced = false;
  return text.split('\n').map((line) => {
    if (/^\s*(```|~~~)/.test(line)) {
      fenced = !fenced;
      return '';
    }
    return fenced ? '' : line.replace(/`[^`]*`/g, '');
  });
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens; repeats get -1, -2. */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  let fenced = false;
  for (const line of text.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    const heading = fenced ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const slug = (heading[1] as string)
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    result.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return result;
}

describe('the Markdown files', () => {
  it('link only to files that exist and to headings that exist', () => {
    const broken: string[] = [];
    const cache = new Map<string, Set<string>>();
    const anchorsOf = (path: string): Set<string> => {
      let found = cache.get(path);
      if (!found) cache.set(path, (found = anchors(readFileSync(path, 'utf8'))));
      return found;
    };
    for (const file of markdown) {
      const path = join(repoRoot, file);
      prose(readFileSync(path, 'utf8')).forEach((line, index) => {
        for (const match of line.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
          const target = match[1] as string;
          if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
          const [file2 = '', anchor] = target.split('#');
          const resolved = file2 === '' ? path : join(dirname(path), decodeURIComponent(file2));
          const where = `${file}:${index + 1}: ${target}`;
          if (!existsSync(resolved)) {
            broken.push(`${where} (no ${relative(repoRoot, resolved)})`);
            continue;
          }
          if (anchor !== undefined && statSync(resolved).isFile() && resolved.endsWith('.md') && !anchorsOf(resolved).has(anchor)) {
            broken.push(`${where} (no heading with that anchor in ${relative(repoRoot, resolved)})`);
          }
        }
      });
    }
    expect(broken).toEqual([]);
  });

  it('never fetch a package name from the registry: bins run with npx --no-install, installs from the tarballs', () => {
    const fetching: string[] = [];
    for (const file of markdown) {
      readFileSync(join(repoRoot, file), 'utf8')
        .split('\n')
        .forEach((line, index) => {
          const where = `${file}:${index + 1}: ${line.trim()}`;
          // npx without --no-install (or --no) downloads the name when it is not installed.
          for (const match of line.matchAll(/\bnpx\s+((?:--?[\w-]+\s+)*)eventflow/g)) if (!/--no-install|--no\b/.test(match[1] ?? '')) fetching.push(where);
          // Registry installs only where the line says they are for once the packages are published.
          if (/npm (?:install|i|add)\s+(?:-\S+\s+)*@eventflow\//.test(line) && !/published/i.test(line)) fetching.push(where);
        });
    }
    expect(fetching).toEqual([]);
  });
});
