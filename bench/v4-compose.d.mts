// Types of the v4 reference (bench/v4-compose.mjs) for the tests that compare core against it.
export declare function clone<T>(value: T): T;
export declare function merge(a: unknown, b: unknown): unknown;
export declare function assign<S extends Record<string, unknown>>(state: S, m: unknown): S;
export declare function composeEventlogStateV4(eventlog: ReadonlyArray<{ readonly data: unknown }>, size?: number): Record<string, unknown>;
