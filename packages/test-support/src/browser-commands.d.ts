/** Types of the commands in gateway-commands.ts, as browser tests see them. */
import 'vitest/browser';

declare module 'vitest/browser' {
  interface BrowserCommands {
    /** Starts a real gateway in the Node process, with `env` (EVENTFLOW_* settings) if given; `url` is its ws:// URL. */
    gatewayStart(env?: Record<string, string | number>): Promise<{ handle: string; url: string }>;
    /** Stops it, keeping port and database. */
    gatewayStop(handle: string): Promise<void>;
    /** Starts it again on the same port and database. */
    gatewayRestart(handle: string): Promise<void>;
    /** Stops it and deletes its database. */
    gatewayDispose(handle: string): Promise<void>;
    gatewayStats(handle: string): Promise<{ subscriptions: number; consumers: number; waits: number; deliveries: number }>;
  }
}
