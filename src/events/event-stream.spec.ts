import { EventEmitter } from 'node:events';
import type { Principal } from '../auth/principal';
import { EventStream } from './event-stream';
import { messagesOf } from './stream-messages';
import { PublishedEvent, REPLAY_PAGE_QUERY } from './published-events';

const event = (n: number, bytes: number): PublishedEvent =>
  ({
    tenant_id: '00000000-0000-4000-8000-000000000001',
    id: `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
    seq: String(n),
    name: 'item.created',
    audience: { item_type: 'core.note' },
    payload: { event: 'item.created', item: { body: 'x'.repeat(bytes) } },
    created_at: '2026-01-01T00:00:00.000Z',
    published_seq: String(100 + n),
  }) as unknown as PublishedEvent;

describe('messagesOf (what a batch is published as)', () => {
  it('splits a batch into messages of at most 1 MiB, keeping the publication order', () => {
    const batch = Array.from({ length: 40 }, (_, n) => event(n, 50_000));
    const messages = messagesOf(batch);
    expect(messages.length).toBeGreaterThan(1);
    for (const m of messages) expect(Buffer.byteLength(m)).toBeLessThanOrEqual(1024 * 1024);
    expect(messages.flatMap((m) => JSON.parse(m) as PublishedEvent[])).toEqual(batch);
  });

  it('sends an event over 64 KiB as a reference the streams read from the outbox', () => {
    const [small, large] = [event(1, 10), event(2, 70_000)];
    const [message] = messagesOf([small, large]);
    expect(JSON.parse(message)).toEqual([small, { ref: true, tenant_id: large.tenant_id, id: large.id, published_seq: large.published_seq }]);
  });

  it('keeps a republished event\'s first place in its reference', () => {
    const large = { ...event(2, 70_000), first_published_seq: '7' };
    expect(JSON.parse(messagesOf([large])[0])).toEqual([{ ref: true, tenant_id: large.tenant_id, id: large.id, published_seq: large.published_seq, first_published_seq: '7' }]);
  });
});

describe('EventStream (one stream\'s sends, one after another)', () => {
  const tenantId = '00000000-0000-4000-8000-000000000001';
  const principal = { tenantId, credentialId: 'c', kind: 'api_key', role: 'admin' } as unknown as Principal;
  const job = (n: number): PublishedEvent =>
    ({
      tenant_id: tenantId,
      id: `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
      seq: String(n),
      name: 'bulk_job.completed',
      audience: { job_credential: 'c' },
      payload: { job: { n } },
      created_at: '2026-01-01T00:00:00.000Z',
      published_seq: String(n),
    }) as unknown as PublishedEvent;

  /** A response that keeps what is written to it. */
  class Response extends EventEmitter {
    destroyed = false;
    writableEnded = false;
    writableLength = 0;
    socket = null;
    readonly written: number[] = [];
    writeHead(): this {
      return this;
    }
    write(text: string): boolean {
      const id = /^id: (\S+)/.exec(text)?.[1];
      if (id) this.written.push(Number(id.slice(-12)));
      return true;
    }
    end(): void {
      this.writableEnded = true;
    }
    destroy(): void {
      this.destroyed = true;
    }
  }

  const until = async (condition: () => boolean) => {
    for (let turns = 0; !condition(); turns++) {
      if (turns > 10_000) throw new Error('the condition never held');
      await new Promise(setImmediate);
    }
  };

  /** A stream opened (without Last-Event-ID) on an EventStream over these stand-ins; its client reads everything. */
  const openStream = async (db: { query: (sql: string, params: unknown[]) => Promise<unknown> }, types: { catalog: () => Promise<unknown> }) => {
    let onMessage!: (message: string) => void;
    let resubscribed!: () => void;
    const pubsub = {
      subscribe: async (_channel: string, handler: (message: string) => void) => void (onMessage = handler),
      onResubscribed: (listener: () => void) => void (resubscribed = listener),
    };
    const credentials = { resolveBearer: async () => ({ principal }) };
    const slots = { take: async () => ({}), release: async () => undefined, renew: async () => undefined };
    const config = { EVENTS_HEARTBEAT_SECONDS: 60, EVENT_RETENTION_DAYS: 7 };
    const stream = new EventStream(db as never, config as never, pubsub as never, credentials as never, types as never, slots as never);
    await stream.onApplicationBootstrap();
    const res = new Response();
    const reply = { request: { method: 'GET', headers: { authorization: 'Bearer k' }, raw: { socket: { destroyed: false } } }, hijack: () => undefined, getHeaders: () => ({}), raw: res };
    await stream.open(principal, { events: ['*'], typeFilter: null }, undefined, reply as never);
    return { stream, res, publish: (events: PublishedEvent[]) => onMessage(JSON.stringify(events)), resubscribed: () => resubscribed() };
  };

  it('lets a catch-up after a lost subscription replay only once a live batch being sent to the stream is done: every event once, in order', async () => {
    // The outbox: events 5 to 2010, more than the ids a stream remembers (SEEN_IDS), published after the stream's position (4).
    const outbox = Array.from({ length: 2006 }, (_, n) => job(5 + n));
    const db = {
      query: async (sql: string, params: unknown[]) => {
        if (sql === REPLAY_PAGE_QUERY) {
          const after = Number(params[1]);
          const page = outbox.filter((e) => Number(e.published_seq) > after).slice(0, 500);
          return page.map((e, n) => ({ ...e, more: n === page.length - 1 ? null : true }));
        }
        return [{ at: '4' }]; // latestPosition
      },
    };
    // The first catalogue read (the live batch's) takes until the test lets it go.
    let letGo!: () => void;
    let slow: Promise<unknown> | undefined = new Promise<void>((resolve) => (letGo = resolve)).then(() => ({}));
    let catalogueReads = 0;
    const types = {
      catalog: () => {
        catalogueReads++;
        const read = slow ?? Promise.resolve({});
        slow = undefined;
        return read;
      },
    };
    const { stream, res, publish, resubscribed } = await openStream(db, types);
    try {
      publish([outbox[0]]); // event 5 live: its sending waits for the catalogue
      await until(() => catalogueReads === 1);
      resubscribed(); // the subscription was lost and is back meanwhile
      await new Promise(setImmediate);
      letGo();
      publish([job(2011)]);
      await until(() => res.written.includes(2011));

      expect(res.written).toEqual(Array.from({ length: 2007 }, (_, n) => 5 + n));
    } finally {
      stream.beforeApplicationShutdown();
    }
  });

  it('catches up on a batch missed while a catch-up was finishing before sending the live events held past it', async () => {
    const outbox = Array.from({ length: 6 }, (_, n) => job(5 + n)); // 5 to 10
    const db = {
      query: async (sql: string, params: unknown[]) => {
        if (sql !== REPLAY_PAGE_QUERY) return [{ at: '4' }]; // latestPosition
        const page = outbox.filter((e) => Number(e.published_seq) > Number(params[1]));
        return page.map((e, n) => ({ ...e, more: n === page.length - 1 ? null : true }));
      },
    };
    let hold: Promise<void> | undefined;
    let letGo!: () => void;
    const types = { catalog: async () => ((await hold), {}) };
    const { stream, res, publish, resubscribed } = await openStream(db, types);
    try {
      publish([outbox[0]]);
      await until(() => res.written.includes(5));
      hold = new Promise<void>((resolve) => (letGo = resolve));
      resubscribed(); // the catch-up reads 6 to 10, and waits to send them
      await new Promise(setImmediate);
      outbox.push(job(11), job(12), job(13));
      publish([job(11)]);
      publish([job(13)]); // 12 was numbered but not heard here
      await new Promise(setImmediate);
      hold = undefined;
      letGo();
      await until(() => res.written.includes(13));

      expect(res.written).toEqual([5, 6, 7, 8, 9, 10, 11, 12, 13]);
    } finally {
      stream.beforeApplicationShutdown();
    }
  });

  it('leaves out an event published again (its relay lease lapsed) at whatever distance, and sends what it had not served', async () => {
    const db = { query: async () => [{ at: '4' }] }; // latestPosition
    const { stream, res, publish } = await openStream(db, { catalog: async () => ({}) });
    try {
      // Events 5 to 2010 live, more than the ids a stream remembers (SEEN_IDS).
      const live = Array.from({ length: 2006 }, (_, n) => job(5 + n));
      for (let n = 0; n < live.length; n += 200) publish(live.slice(n, n + 200));
      // Event 5 again (first published at 5), then event 3 again: first published before the stream began.
      const again = (n: number, at: number): PublishedEvent => ({ ...job(n), published_seq: String(at), first_published_seq: String(n) });
      publish([again(5, 2011), again(3, 2012), job(2013)]);
      await until(() => res.written.includes(2013));

      expect(res.written).toEqual([...live.map((e) => Number(e.seq)), 2013]);
    } finally {
      stream.beforeApplicationShutdown();
    }
  });

  it('sends an event published again whose first place came before the first batch the instance heard: nothing says that place was heard', async () => {
    // Opened at 4; event 5 was numbered but its relay died before publishing it, so the first
    // batch heard here is 6: no batch before it to notice the hole by.
    const db = { query: async () => [{ at: '4' }] };
    const { stream, res, publish } = await openStream(db, { catalog: async () => ({}) });
    try {
      publish([job(6)]);
      publish([{ ...job(5), published_seq: '7', first_published_seq: '5' }, job(8)]);
      await until(() => res.written.includes(8));

      expect(res.written).toEqual([6, 5, 8]);
    } finally {
      stream.beforeApplicationShutdown();
    }
  });
});
