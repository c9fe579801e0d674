export { startGateway, type Gateway, type GatewayDependencies, type GatewaySettings } from './server/gateway.js';
export { configSchema, parseConfig, type GatewayConfig, type GatewayConfigInput } from './config.js';
export type { EventStore, NewEvent, AppendOptions, AppendResult, EventFilter, Outcome } from './store/store.js';
export { SqliteStore } from './store/sqlite/sqlite.js';
export type { Router, RouteTarget } from './router/router.js';
export { LocalRouter } from './router/local.js';
export { createLogger, type Logger, type LogLevel } from './log.js';
