import { messagesOf, PublishedEvent } from './event-stream';

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
});
