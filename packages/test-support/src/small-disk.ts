/**
 * A small real file system for tests of a full disk: a tmpfs of a few MB mounted on a temp folder
 * (`mount -t tmpfs`, which needs root, as CI runs), filled by a file of the test's and freed again.
 * `smallDiskUnavailable` says why none can be mounted here; the tests skip with that reason printed.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, statfsSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface SmallDisk {
  readonly dir: string;
  /** Bytes a file can still take. */
  available(): number;
  /** Fills the disk with a file of its own until `leave` bytes are free (or none, if something else wrote meanwhile). */
  fill(leave: number): void;
  /** Removes that file. */
  free(): void;
  /** Unmounts the disk and removes its folder. */
  dispose(): void;
}

function mountTmpfs(megabytes: number): string {
  const dir = mkdtempSync(join(tmpdir(), 'eventflow-disk-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${megabytes}m`, 'tmpfs', dir], { stdio: 'pipe' });
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return dir;
}

function probe(): string | undefined {
  if (process.platform !== 'linux') return `a tmpfs can only be mounted on Linux, not ${process.platform}`;
  if (process.getuid?.() !== 0) return 'mounting a tmpfs needs root';
  try {
    const dir = mountTmpfs(1);
    execFileSync('umount', [dir]);
    rmSync(dir, { recursive: true, force: true });
    return undefined;
  } catch (error) {
    const stderr = (error as { stderr?: Buffer }).stderr?.toString().trim();
    return `mount -t tmpfs failed here (${stderr || String(error)})`;
  }
}

/** Why no small disk can be mounted here, or undefined. */
export const smallDiskUnavailable = probe();
if (smallDiskUnavailable !== undefined) console.warn(`Skipping the full-disk tests: ${smallDiskUnavailable}`);

/** Mounts a tmpfs of `megabytes` MB. */
export function mountSmallDisk(megabytes: number): SmallDisk {
  const dir = mountTmpfs(megabytes);
  const filler = join(dir, 'filler');
  const available = (): number => {
    const stats = statfsSync(dir);
    return stats.bavail * stats.bsize;
  };
  return {
    dir,
    available,
    fill(leave) {
      // In chunks, and no further than the disk allows: whatever writes there meanwhile takes space too.
      const chunk = Buffer.alloc(64 * 1024);
      const fd = openSync(filler, 'a');
      try {
        for (let left = available() - leave; left > 0; left -= chunk.length) writeSync(fd, chunk, 0, Math.min(chunk.length, left));
      } catch (error) {
        if ((error as { code?: unknown }).code !== 'ENOSPC') throw error;
      } finally {
        closeSync(fd);
      }
    },
    free() {
      rmSync(filler, { force: true });
    },
    dispose() {
      execFileSync('umount', ['-l', dir]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
