/**
 * Joining an eventflow v4 hub mesh (EVENTFLOW_ROUTER=hubs). server/gateway.ts imports this module only when
 * the mesh is configured, so that a gateway on the embedded store never loads the certificate stack
 * (@peculiar/x509, reflect-metadata) or the hub router.
 */
import { createPool, type Pool } from 'mysql2/promise';
import { mysqlOptions, type GatewayConfig } from '../config.js';
import { CertificateManager } from './certificates/manager.js';
import { certificateConfigFromEnv } from './certificates/config.js';
import type { Logger } from '../log.js';
import { HubRouter } from './mesh-router.js';
import type { GatewaySettings } from '../server/gateway.js';
import type { EventStore } from '../store/store.js';
import { setSessionOnConnect } from '../store/mysql/statements.js';

/** The hub router with what it needs: a pool on the shared database and the v4 certificates. */
export async function joinMesh(settings: GatewayConfig, env: GatewaySettings, store: EventStore, id: string, log: Logger): Promise<{ router: HubRouter; pool: Pool }> {
  // Only the connection settings go to the driver: the store's own options (v4Writers) are not mysql2's.
  const { host, port, user, password, database } = mysqlOptions(settings);
  const pool = createPool({ host, port, user, password, database, connectionLimit: 4, charset: 'utf8mb4', timezone: 'Z' });
  // Values here are still formatted on the client: correct only under a known sql_mode.
  setSessionOnConnect(pool);
  const strings = Object.fromEntries(Object.entries(env).map(([key, value]) => [key, value === undefined ? undefined : String(value)]));
  const certificates = new CertificateManager({
    pool,
    id,
    name: settings.EVENTFLOW_SPOKE_NAME,
    config: certificateConfigFromEnv(strings),
    onError: (error) => log.warn('certificate refresh failed; the cached chain stays in use', { error }),
  });
  return { router: new HubRouter({ store, pool, certificates, log, pollInterval: settings.EVENTFLOW_MESH_POLL_MS, publisher: id }), pool };
}
