export declare const SKIPPED: 77;
export declare function findChromium(env?: Record<string, string | undefined>): { path: string; missing?: undefined } | { missing: string; path?: undefined };
