/**
 * Blob content in PostgreSQL: `blob_chunks(tenant_id, hash, seq, data bytea)`, 1 MiB per row,
 * so neither an upload nor a download ever holds more than a chunk or two in memory, and
 * every instance pointed at the database sees the same content (no shared volume needed).
 *
 * A put writes all chunks in one transaction (the service's, when given), serialised per address
 * by its lock (blob-address-lock.ts), so content is visible whole or not at all and two
 * concurrent puts of one blob write it once.
 */
import { open as openFile } from 'node:fs/promises';
import { Readable } from 'node:stream';
import type { DataSource, EntityManager } from 'typeorm';
import { lockBlobAddress } from './blob-address-lock';
import { BlobContentMissing, BlobStore } from './blob-store';
import type { ByteRange } from './byte-range';

export const CHUNK_BYTES = 1024 * 1024;

export class PostgresBlobStore implements BlobStore {
  constructor(private readonly db: DataSource) {}

  async put(tenantId: string, hash: string, file: string, within?: EntityManager): Promise<void> {
    const handle = await openFile(file, 'r');
    const write = async (m: EntityManager): Promise<void> => {
      await lockBlobAddress(m, tenantId, hash);
      const present = await m.query('SELECT 1 FROM blob_chunks WHERE tenant_id = $1 AND hash = $2 AND seq = 0', [tenantId, hash]);
      if (present.length > 0) return;
      const buffer = Buffer.allocUnsafe(CHUNK_BYTES);
      let position = 0;
      for (let seq = 0; ; seq++) {
        const length = await readFull(handle, buffer, position);
        // An empty blob still gets its (empty) chunk 0: that row is what "present" means.
        if (length === 0 && seq > 0) break;
        await m.query('INSERT INTO blob_chunks (tenant_id, hash, seq, data) VALUES ($1, $2, $3, $4)', [
          tenantId,
          hash,
          seq,
          buffer.subarray(0, length),
        ]);
        position += length;
        if (length < CHUNK_BYTES) break;
      }
    };
    try {
      await (within ? write(within) : this.db.transaction(write));
    } finally {
      await handle.close();
    }
  }

  async open(tenantId: string, hash: string, range?: ByteRange): Promise<Readable> {
    // Every chunk but the last holds CHUNK_BYTES, so a range names the chunks it needs.
    const from = range ? Math.floor(range.start / CHUNK_BYTES) : 0;
    // The first chunk is fetched now, so a missing blob is known before any header is sent.
    const rows: Array<{ data: Buffer; last: number }> = await this.db.query(
      `SELECT data, (SELECT max(seq) FROM blob_chunks WHERE tenant_id = $1 AND hash = $2) AS last
         FROM blob_chunks WHERE tenant_id = $1 AND hash = $2 AND seq = $3`,
      [tenantId, hash, from],
    );
    if (rows.length === 0) throw new BlobContentMissing(tenantId, hash);
    const { data: first } = rows[0];
    const last = range ? Math.min(rows[0].last, Math.floor(range.end / CHUNK_BYTES)) : rows[0].last;
    const inRange = (data: Buffer, seq: number) =>
      range ? data.subarray(Math.max(0, range.start - seq * CHUNK_BYTES), range.end + 1 - seq * CHUNK_BYTES) : data;
    const db = this.db;
    async function* chunks(): AsyncGenerator<Buffer> {
      const head = inRange(first, from);
      if (head.length > 0) yield head;
      // Pulled one chunk at a time as the client reads: backpressure reaches the database.
      for (let seq = from + 1; seq <= last; seq++) {
        const next: Array<{ data: Buffer }> = await db.query(
          'SELECT data FROM blob_chunks WHERE tenant_id = $1 AND hash = $2 AND seq = $3',
          [tenantId, hash, seq],
        );
        if (next.length === 0) throw new BlobContentMissing(tenantId, hash);
        yield inRange(next[0].data, seq);
      }
    }
    return Readable.from(chunks(), { objectMode: false, highWaterMark: 64 * 1024 });
  }

  async has(tenantId: string, hash: string, within: EntityManager = this.db.manager): Promise<boolean> {
    const rows = await within.query('SELECT 1 FROM blob_chunks WHERE tenant_id = $1 AND hash = $2 AND seq = 0', [tenantId, hash]);
    return rows.length > 0;
  }

  async remove(tenantId: string, hash: string, within: EntityManager = this.db.manager): Promise<void> {
    await within.query('DELETE FROM blob_chunks WHERE tenant_id = $1 AND hash = $2', [tenantId, hash]);
  }

  async removeTenant(tenantId: string): Promise<void> {
    await this.db.query('DELETE FROM blob_chunks WHERE tenant_id = $1', [tenantId]);
  }
}

/** Reads from `position` until `buffer` is full or the file ends; returns the byte count. */
async function readFull(handle: import('node:fs/promises').FileHandle, buffer: Buffer, position: number): Promise<number> {
  let filled = 0;
  while (filled < buffer.length) {
    const { bytesRead } = await handle.read(buffer, filled, buffer.length - filled, position + filled);
    if (bytesRead === 0) break;
    filled += bytesRead;
  }
  return filled;
}
