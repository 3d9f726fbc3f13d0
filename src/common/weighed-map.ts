/**
 * A Map bounded by its count of entries and by the bytes they are estimated to hold: past either
 * bound, the oldest entries (first in iteration order) go first. `set` puts an entry at the
 * newest end, and `touch` moves one there, which makes it least-recently-used order for a cache
 * that touches what it reads. Used by the caches that hold large values per key (the credential
 * cache, compiled validators), where a count alone let them hold gigabytes.
 */
export class WeighedMap<K, V> {
  private readonly entries = new Map<K, { value: V; bytes: number }>();
  private total = 0;

  constructor(
    private readonly maxEntries: number,
    /** May be changed; the next `set`, `reweigh` or `evict` holds to it. */
    public maxBytes: number,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  /** The sum of the entries' estimated bytes. */
  get bytes(): number {
    return this.total;
  }

  get(key: K): V | undefined {
    return this.entries.get(key)?.value;
  }

  /** The entry's value, now the newest entry. */
  touch(key: K): V | undefined {
    const hit = this.entries.get(key);
    if (!hit) return undefined;
    this.entries.delete(key);
    this.entries.set(key, hit);
    return hit.value;
  }

  /** Sets `key` as the newest entry, of `bytes`, then drops the oldest past the bounds. */
  set(key: K, value: V, bytes: number): void {
    this.delete(key);
    this.entries.set(key, { value, bytes });
    this.total += bytes;
    this.evict();
  }

  /** Weighs an entry again (its value grew or shrank), then drops the oldest past the bounds. */
  reweigh(key: K, bytes: number): void {
    const hit = this.entries.get(key);
    if (!hit) return;
    this.total += bytes - hit.bytes;
    hit.bytes = bytes;
    this.evict();
  }

  delete(key: K): boolean {
    const hit = this.entries.get(key);
    if (!hit) return false;
    this.entries.delete(key);
    this.total -= hit.bytes;
    return true;
  }

  clear(): void {
    this.entries.clear();
    this.total = 0;
  }

  /** Drops the oldest entries while there are more than `maxEntries` or they hold more than `maxBytes`. */
  evict(): void {
    for (const key of this.entries.keys()) {
      if (this.entries.size <= this.maxEntries && this.total <= this.maxBytes) return;
      this.delete(key);
    }
  }

  /** Oldest first; deleting the current entry while iterating is safe (a Map's). */
  *[Symbol.iterator](): IterableIterator<[K, V]> {
    for (const [key, { value }] of this.entries) yield [key, value];
  }
}
