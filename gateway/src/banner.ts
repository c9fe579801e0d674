/**
 * The plain-text lines the gateway bin prints once it listens (stdout, beside the JSON log on
 * stderr): every URL a person needs and what the gateway runs on.
 */
import { existsSync } from 'node:fs';
import { packageRoot } from './package-root.js';
import { isLoopbackHost } from './connection/limits.js';
import type { Gateway } from './server/gateway.js';
import { bundledConsoleDir, consolePath, currentSites } from './server/sites.js';

/** In a checkout of the repository (not an installed package), a missing build is built by `npm run build`. */
const inRepository = (): boolean => existsSync(new URL('../tsconfig.build.json', packageRoot));

/** Why nothing is served at `/`, in the words of what to change. */
function nothingServed(demoDir: string | undefined, consoleDir: string | undefined, httpUrl: string): string {
  const reasons: string[] = [];
  if (demoDir !== undefined) reasons.push(`EVENTFLOW_DEMO_DIR=${demoDir} does not exist`);
  if (consoleDir === 'off') reasons.push('the console is off (EVENTFLOW_CONSOLE_DIR=off)');
  else if (consoleDir !== undefined) reasons.push(`EVENTFLOW_CONSOLE_DIR=${consoleDir} does not exist`);
  else if (inRepository()) reasons.push('the console is not built (npm run build)');
  else reasons.push(`the console build is missing from this install (${bundledConsoleDir}); reinstall @eventflow/gateway`);
  return `none: ${reasons.join('; ')}; ${httpUrl} says how to connect`;
}

/** The addresses that mean every interface: no browser opens them (Chrome refuses 0.0.0.0), so URLs name loopback instead. */
const EVERY_INTERFACE: Readonly<Record<string, string>> = { '0.0.0.0': '127.0.0.1', '::': '[::1]' };

export function gatewayBanner(gateway: Pick<Gateway, 'id' | 'config' | 'url' | 'httpUrl'>): string {
  const { config } = gateway;
  const host = config.EVENTFLOW_HOST;
  const local = EVERY_INTERFACE[host];
  const listened = host.includes(':') ? `[${host}]` : host;
  const here = (url: string): string => (local === undefined ? url : url.replace(`//${listened}:`, `//${local}:`));
  const httpUrl = here(gateway.httpUrl);
  const sites = currentSites(config.EVENTFLOW_DEMO_DIR, config.EVENTFLOW_CONSOLE_DIR);
  const consoleAt = consolePath(sites);
  const consoleUrl = consoleAt === undefined ? undefined : new URL(consoleAt.slice(1), httpUrl).href;
  const dashboard =
    sites.demo !== undefined
      ? `${httpUrl}${consoleUrl ? ` (console: ${consoleUrl})` : ''}`
      : consoleUrl
        ? `${consoleUrl} (the console)`
        : nothingServed(config.EVENTFLOW_DEMO_DIR, config.EVENTFLOW_CONSOLE_DIR, httpUrl);
  const store =
    config.EVENTFLOW_STORE === 'mysql'
      ? `mysql ${config.EVENTFLOW_MYSQL_USER}@${config.EVENTFLOW_MYSQL_HOST}:${config.EVENTFLOW_MYSQL_PORT}, database ${config.EVENTFLOW_MYSQL_DATABASE}`
      : `sqlite ${config.EVENTFLOW_SQLITE_PATH}`;
  const routers = {
    local: 'local (in this process)',
    hubs: 'hubs (an eventflow v4 hub mesh on the shared database)',
    nats: `nats ${config.EVENTFLOW_NATS_SERVERS}, subjects ${config.EVENTFLOW_NATS_SUBJECT_PREFIX}.>`,
  };
  const router = routers[config.EVENTFLOW_ROUTER];
  const auth =
    config.EVENTFLOW_AUTH === 'jwt'
      ? `jwt (${config.EVENTFLOW_JWT_SECRET !== undefined ? 'HS256 secret' : 'public key'}${config.EVENTFLOW_AUTH_ANONYMOUS.length > 0 ? `; without a token: ${config.EVENTFLOW_AUTH_ANONYMOUS.join(', ')}` : ''})`
      : isLoopbackHost(host)
        ? 'none (every connection may do everything)'
        : `none (every connection may do everything), and EVENTFLOW_HOST=${host} lets other machines connect: set EVENTFLOW_AUTH=jwt, or keep the port behind a proxy that authenticates`;
  const lines = [
    `eventflow gateway ${gateway.id}`,
    ...(local === undefined ? [] : [`  listening: every interface (EVENTFLOW_HOST=${host}); from another machine, this one's address on port ${new URL(gateway.httpUrl).port}`]),
    `  dashboard: ${dashboard}`,
    `  clients:   ${here(gateway.url)}`,
    `  health:    ${httpUrl}healthz`,
    `  ready:     ${httpUrl}readyz`,
    `  metrics:   ${config.EVENTFLOW_METRICS === 'on' ? `${httpUrl}metrics` : 'off (EVENTFLOW_METRICS=off)'}`,
    `  store:     ${store}`,
    `  router:    ${router}`,
    `  auth:      ${auth}`,
  ];
  return `${lines.join('\n')}\n`;
}
