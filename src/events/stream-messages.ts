/**
 * What goes through Redis from a relay to every instance's streams (event-stream.ts sends it for
 * the relay, and hears it): batches of published events, an event too large to carry as a
 * reference to it in the outbox, in messages of bounded size, and a relay's notice of the
 * batches it could not publish.
 */
import type { PublishedEvent } from './published-events';

/** The Redis channel of published events. */
export const CHANNEL = 'events';

/**
 * Bounds of what goes through Redis. Redis drops a subscriber whose unread messages pass its
 * output buffer limit (32 MB by default) while staying up: one batch of 60 events of a 600 KB
 * item, published as one 36 MB message, cut every instance's subscription, and with it their
 * type-change notices. An event larger than INLINE_EVENT_BYTES goes as a reference the
 * instances with streams of its tenant read from the outbox; a batch goes in messages of at
 * most MESSAGE_BYTES (or one event).
 */
const INLINE_EVENT_BYTES = 64 * 1024;
const MESSAGE_BYTES = 1024 * 1024;

/** A published event too large to carry: streams that want it read it from the outbox. */
export interface PublishedRef {
  ref: true;
  tenant_id: string;
  id: string;
  published_seq: string;
  first_published_seq?: string | null;
}

export type Published = PublishedEvent | PublishedRef;
export const isRef = (e: Published): e is PublishedRef => 'ref' in e;

/** The messages a batch is published in, in publication order: JSON arrays of events or references. */
export function messagesOf(events: PublishedEvent[]): string[] {
  const messages: string[] = [];
  let parts: string[] = [];
  let bytes = 0;
  for (const e of events) {
    let part = JSON.stringify(e);
    if (Buffer.byteLength(part) > INLINE_EVENT_BYTES) {
      const ref: PublishedRef = { ref: true, tenant_id: e.tenant_id, id: e.id, published_seq: e.published_seq, first_published_seq: e.first_published_seq };
      part = JSON.stringify(ref);
    }
    const size = Buffer.byteLength(part) + 1;
    if (parts.length && bytes + size > MESSAGE_BYTES) {
      messages.push(`[${parts.join(',')}]`);
      parts = [];
      bytes = 0;
    }
    parts.push(part);
    bytes += size;
  }
  if (parts.length) messages.push(`[${parts.join(',')}]`);
  return messages;
}

/** A relay's notice that it numbered batches up to `through` it could not publish. */
export interface PublishedThrough {
  through: string;
}
