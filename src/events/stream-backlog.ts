/**
 * How an event stream ends when its client does not read. What the kernel will not take waits in
 * the response's own buffer (`writableLength`), which shrinks only as the client reads; a polite
 * `end()` waits behind it. So a stream given up on for falling behind is cut off (a reset: its
 * buffers, the kernel's send queue included, are freed at once), and a polite end that the client
 * does not take within a grace period is cut off too. Its slot is given back only once the
 * connection is gone (event-stream.ts), so a stuck client keeps counting against the cap until then.
 */
import type { ServerResponse } from 'node:http';

/** Heartbeats in a row during which a client may take nothing of what waits for it before its stream is cut off. */
export const STALLED_HEARTBEATS = 4;

/**
 * Whether a stream's client is still taking what it is sent. One that took nothing for
 * STALLED_HEARTBEATS heartbeats while bytes waited (the kernel's buffers for it full) has stopped
 * reading; one reading slowly, however slowly, has not (MAX_BUFFERED_BYTES bounds it). A stream
 * with nothing waiting is never stalled.
 */
export class Backlog {
  /** The buffer's length after the last write: it only shrinks as the client reads. */
  private afterWrite = 0;
  private taken = false;
  private idleBeats = 0;

  /** Before each write, with the buffer's length then. */
  before(length: number): void {
    if (length < this.afterWrite) this.taken = true;
  }

  /** After each write. */
  after(length: number): void {
    this.afterWrite = length;
  }

  /** At each heartbeat, before it is written: true once the client has stalled. */
  stalled(length: number): boolean {
    this.before(length);
    this.idleBeats = this.taken || length === 0 ? 0 : this.idleBeats + 1;
    this.taken = false;
    return this.idleBeats >= STALLED_HEARTBEATS;
  }
}

/** Drops the connection with a reset, freeing what it holds at once, whether or not its client reads. */
export function cutOff(res: ServerResponse): void {
  if (res.socket && !res.socket.destroyed) res.socket.resetAndDestroy();
  else res.destroy();
}

/** Ends the response politely, cutting it off should its client not take the end within `graceMs`. */
export function endWithin(res: ServerResponse, graceMs: number): void {
  if (res.destroyed || res.writableEnded) return;
  res.end();
  const timer = setTimeout(() => cutOff(res), graceMs);
  timer.unref();
  res.once('close', () => clearTimeout(timer));
}
