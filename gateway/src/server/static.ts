/**
 * Serves a built web app (the console, the demo dashboard): files under one directory, index.html
 * for unknown routes, every answer with the security headers below.
 */
import { createReadStream, statSync } from 'node:fs';
import { extname, join, normalize, sep } from 'node:path';
import type { IncomingMessage, ServerResponse } from 'node:http';

const types: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.map': 'application/json',
  '.woff2': 'font/woff2',
};

/**
 * The apps load nothing but their own files and talk to gateways over WebSockets: a page injected
 * with markup (stored XSS the apps missed) can run no script of another origin nor inline, and
 * no page of another site can frame them (their requeue and discard buttons must not be clickjacked).
 * `ws:`/`wss:` stay open: the console may be pointed at another gateway (it asks the operator first).
 * No 'unsafe-inline' styles: React sets `style` props through the CSSOM, which `style-src` does not restrict.
 */
export const SITE_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "font-src 'self'",
    "connect-src 'self' ws: wss:",
    "worker-src 'self'",
    "manifest-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; '),
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
};

export function serveStatic(root: string, pathname: string, request: IncomingMessage, response: ServerResponse): void {
  let relative: string;
  try {
    relative = normalize(decodeURIComponent(pathname)).replace(/^([/\\])+/, '');
  } catch {
    response.writeHead(400, SITE_HEADERS).end();
    return;
  }
  // normalize() resolves "..": anything still climbing out of the root is refused.
  if (relative.startsWith('..') || relative.includes(`${sep}..${sep}`)) {
    response.writeHead(403, SITE_HEADERS).end();
    return;
  }
  let file = join(root, relative || 'index.html');
  if (!isFile(file)) file = join(root, 'index.html'); // client-side routes
  if (!isFile(file)) {
    response.writeHead(404, SITE_HEADERS).end();
    return;
  }
  const immutable = relative.startsWith('assets/');
  response.writeHead(200, {
    ...SITE_HEADERS,
    'content-type': types[extname(file)] ?? 'application/octet-stream',
    'cache-control': immutable ? 'public, max-age=31536000, immutable' : 'no-cache',
  });
  if (request.method === 'HEAD') response.end();
  // The file can vanish or fail between stat and read: an unhandled stream 'error' would end the process.
  else createReadStream(file).on('error', () => response.destroy()).pipe(response);
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}
