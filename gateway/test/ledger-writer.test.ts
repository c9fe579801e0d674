/**
 * LedgerWriter's turn beside the appends: a settle batch due in the same turn as an append batch
 * is written after it (a new job's delivery waits on its append's commit; a settle's answer only
 * returns capacity), but it yields one turn at most, so appends in every turn cannot starve settles;
 * with no append due it is written at once.
 */
import { describe, expect, it } from 'vitest';
import { LedgerWriter } from '../src/delivery/ledger-writer.js';
import { GroupCommit } from '../src/store/group-commit.js';
import type { DeliveryLedger, LedgerAction } from '../src/store/ledger.js';
import type { AppendOutcome, AppendRequest } from '../src/store/store.js';

/** Lets the setImmediate callbacks queued so far (batch cuts, flushes) and their promise reactions run. */
const turnOfTheLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

const settle = (delivery: string): LedgerAction => ({ kind: 'outcome', delivery, outcome: 'success' });
const event = (pid: string) => ({ id: pid, domain: 'd', name: 'n', pid, data: {} });

/** The order in which the store wrote appends and ledger batches. */
function store(): { writes: string[]; group: GroupCommit; writer: LedgerWriter } {
  const writes: string[] = [];
  const group = new GroupCommit(async (requests: readonly AppendRequest[]): Promise<AppendOutcome[]> => {
    writes.push(`append ${requests.map((request) => request.event.pid).join(',')}`);
    return requests.map((request) => ({ ok: true, result: { event: { ...request.event, id: request.event.id ?? '', rid: null, timestamp: '', position: 0 }, created: true } }));
  });
  const ledger = {
    async apply(actions: readonly LedgerAction[]) {
      writes.push(`settle ${actions.map((action) => action.delivery).join(',')}`);
      return actions.map(() => undefined);
    },
  } as unknown as DeliveryLedger;
  return { writes, group, writer: new LedgerWriter(() => ledger, () => group.due) };
}

describe('LedgerWriter beside the appends', () => {
  it('writes a settle batch queued first after the append batch due in the same turn', async () => {
    const { writes, group, writer } = store();
    const settled = writer.write(settle('x1'));
    const appended = group.append(event('a1'), undefined);
    await Promise.all([settled, appended]);
    expect(writes).toEqual(['append a1', 'settle x1']);
  });

  it('yields one turn at most: with an append due in every turn, settles are still written', async () => {
    const { writes, group, writer } = store();
    let settled = false;
    void writer.write(settle('x1')).then(() => (settled = true));
    for (let turn = 0; turn < 4 && !settled; turn++) {
      void group.append(event(`a${turn}`), undefined);
      await turnOfTheLoop();
    }
    expect(settled).toBe(true);
    expect(writes.indexOf('settle x1')).toBeLessThanOrEqual(2);
  });

  it('writes at once when no append is due', async () => {
    const { writes, writer } = store();
    let settled = false;
    void writer.write(settle('x1')).then(() => (settled = true));
    await turnOfTheLoop();
    expect(settled).toBe(true);
    expect(writes).toEqual(['settle x1']);
  });
});
