/** Shared test helpers: a read-only view of the gateway's SQLite file for delivery outcomes. */
import Database from 'better-sqlite3';
import { eventually } from '@eventflow/test-support/wait';

export interface PublishedRow {
  success: string | null;
  failed: string | null;
  orphan: string | null;
  consumed_spoke: string | null;
}

export class PublishedView {
  readonly #db: Database.Database;

  constructor(dbPath: string) {
    this.#db = new Database(dbPath, { readonly: true });
  }

  row(id: string): PublishedRow | undefined {
    return this.#db.prepare('SELECT success, failed, orphan, consumed_spoke FROM event_published WHERE event_id = ?').get(id) as PublishedRow | undefined;
  }

  /** Waits until the event has an outcome and returns it. */
  outcome(id: string, timeout = 5_000): Promise<'success' | 'failed'> {
    return eventually(
      () => {
        const row = this.row(id);
        if (row?.success != null && row.failed != null) throw new Error(`event ${id} is marked both success and failed`);
        return row?.success != null ? 'success' : row?.failed != null ? 'failed' : undefined;
      },
      timeout,
      `an outcome for ${id}`,
    );
  }

  /** Waits until the gateway marked the event orphan (nobody consumed, subscribed to or waited for it). */
  orphaned(id: string): Promise<PublishedRow> {
    return eventually(() => {
      const row = this.row(id);
      return row?.orphan != null ? row : undefined;
    }, 5_000, `${id} to be marked orphan`);
  }

  close(): void {
    this.#db.close();
  }
}
