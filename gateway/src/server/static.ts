/** Serves the built demo dashboard: files under one directory, index.html for unknown routes. */
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

export function serveStatic(root: string, pathname: string, request: IncomingMessage, response: ServerResponse): void {
  let relative: string;
  try {
    relative = normalize(decodeURIComponent(pathname)).replace(/^([/\\])+/, '');
  } catch {
    response.writeHead(400).end();
    return;
  }
  // normalize() resolves "..": anything still climbing out of the root is refused.
  if (relative.startsWith('..') || relative.includes(`${sep}..${sep}`)) {
    response.writeHead(403).end();
    return;
  }
  let file = join(root, relative || 'index.html');
  if (!isFile(file)) file = join(root, 'index.html'); // client-side routes
  if (!isFile(file)) {
    response.writeHead(404).end();
    return;
  }
  const immutable = relative.startsWith('assets/');
  response.writeHead(200, {
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
