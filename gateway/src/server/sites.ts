/**
 * The web apps a gateway serves: the console (its build ships in the gateway package, in
 * `console/`) at `/`, or at `/console/` when the demo dashboard is served at `/`. Directories that
 * do not exist are not served, so a gateway built without them answers as before.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { packageRoot } from '../package-root.js';
import { serveStatic, SITE_HEADERS } from './static.js';

/** gateway/console, from src/, dist/ and bundle/ alike. */
export const bundledConsoleDir = fileURLToPath(new URL('console/', packageRoot));

export const CONSOLE_MOUNT = '/console';

export interface Sites {
  demo: string | undefined;
  console: string | undefined;
}

/** The directories to serve now (checked per request: a build may appear or go while the gateway runs). */
export function currentSites(demoDir: string | undefined, consoleDir: string | undefined): Sites {
  const dir = consoleDir === 'off' ? undefined : (consoleDir ?? bundledConsoleDir);
  return { demo: demoDir && existsSync(demoDir) ? demoDir : undefined, console: dir && existsSync(dir) ? dir : undefined };
}

/** Where the console is served, or undefined when it is not. */
export function consolePath(sites: Sites): string | undefined {
  return sites.console === undefined ? undefined : sites.demo === undefined ? '/' : `${CONSOLE_MOUNT}/`;
}

/** The gateway's own routes: never an app's, also when they are off (`/metrics` with EVENTFLOW_METRICS=off answers 404). */
const reserved = new Set(['/healthz', '/readyz', '/metrics']);

/** Serves a GET or HEAD of a site's file; false when no site has the path. */
export function serveSite(sites: Sites, pathname: string, request: IncomingMessage, response: ServerResponse): boolean {
  if ((request.method !== 'GET' && request.method !== 'HEAD') || reserved.has(pathname)) return false;
  if (sites.console && sites.demo) {
    if (pathname === CONSOLE_MOUNT) {
      // The build's asset URLs are relative: the page must be at a path ending in '/'.
      response.writeHead(308, { ...SITE_HEADERS, location: `${CONSOLE_MOUNT}/` }).end();
      return true;
    }
    if (pathname.startsWith(`${CONSOLE_MOUNT}/`)) {
      serveStatic(sites.console, pathname.slice(CONSOLE_MOUNT.length), request, response);
      return true;
    }
  }
  const root = sites.demo ?? sites.console;
  if (root === undefined) return false;
  serveStatic(root, pathname, request, response);
  return true;
}
