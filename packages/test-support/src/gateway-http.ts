/** What tests read of a running gateway over HTTP: /readyz's status and store check, and /metrics series. */

/** A gateway as the probes need it (the in-process Gateway, or a child process's address). */
export interface HttpGateway {
  readonly httpUrl: string;
}

export interface Readiness {
  status: number;
  store: { kind?: string; ready: boolean; reason?: string };
}

/** GET /readyz: its status, and its store check (reason: why it is not ready). */
export async function readyz(gateway: HttpGateway): Promise<Readiness> {
  const response = await fetch(`${gateway.httpUrl}readyz`);
  return { status: response.status, store: ((await response.json()) as { checks: { store: Readiness['store'] } }).checks.store };
}

/** The sum of the /metrics series whose line starts with `match` (a name, or a name and the start of its labels). */
export async function metric(gateway: HttpGateway, match: string): Promise<number> {
  const text = await (await fetch(`${gateway.httpUrl}metrics`)).text();
  return text
    .split('\n')
    .filter((line) => line.startsWith(match))
    .reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
}
