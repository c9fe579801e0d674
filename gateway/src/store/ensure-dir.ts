/**
 * Creates a directory and its missing parents, one level at a time. Not `mkdirSync(dir,
 * { recursive: true })`: on a filesystem that refuses to create entries with ENOENT although the
 * parent exists (procfs: `/proc/nope`), Node's recursive mkdir (20.x) takes the ENOENT to mean "the
 * parent is missing", creates the parent (EEXIST, fine) and tries the child again, forever, at
 * 100% CPU. Here every failure is thrown with its path.
 */
import { mkdirSync, statSync } from 'node:fs';
import { dirname } from 'node:path';

export function ensureDirectory(dir: string): void {
  const missing: string[] = [];
  for (let at = dir; ; at = dirname(at)) {
    const stat = statSync(at, { throwIfNoEntry: false });
    if (stat) {
      if (!stat.isDirectory()) throw Object.assign(new Error(`ENOTDIR: not a directory, mkdir '${at}'`), { code: 'ENOTDIR', syscall: 'mkdir', path: at });
      break;
    }
    missing.push(at);
    if (dirname(at) === at) break;
  }
  for (const path of missing.reverse()) {
    try {
      mkdirSync(path);
    } catch (error) {
      // Made meanwhile by another process starting on the same path: fine.
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
}
