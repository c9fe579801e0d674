// Finds Debian's Chromium the way .ci/run does (`chromium` on PATH; CHROMIUM_PATH overrides), for
// the benches that drive a browser. Never downloads one: without it, those benches are skipped with
// the reason printed (exit code SKIPPED, which bench/run.js reports as skipped, not failed).
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

/** Exit code of a bench step that could not run here (automake's "skipped" convention). */
export const SKIPPED = 77;

const executable = (path) => {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

/** `{ path }` of a runnable Chromium, or `{ missing }`: why there is none and how to get one. */
export function findChromium(env = process.env) {
  const install = 'install Debian\'s (apt-get install chromium, as .ci/run does) or set CHROMIUM_PATH';
  if (env.CHROMIUM_PATH) {
    return executable(env.CHROMIUM_PATH) ? { path: env.CHROMIUM_PATH } : { missing: `CHROMIUM_PATH=${env.CHROMIUM_PATH} is not an executable file; ${install}` };
  }
  for (const dir of (env.PATH ?? '').split(delimiter).filter(Boolean)) {
    for (const name of ['chromium', 'chromium-browser']) if (executable(join(dir, name))) return { path: join(dir, name) };
  }
  return executable('/usr/bin/chromium') ? { path: '/usr/bin/chromium' } : { missing: `no chromium on PATH; ${install}` };
}
