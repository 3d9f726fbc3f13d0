import type { Principal } from '../auth/principal';
import { RecentBodies, WebhookFanout } from './webhook-fanout';

describe('WebhookFanout.recheck (a later attempt\'s body)', () => {
  const tenantId = '00000000-0000-4000-8000-000000000001';
  const admin = { tenantId, credentialId: 'c', kind: 'api_key', role: 'admin' } as unknown as Principal;
  const eventId = '00000000-0000-4000-8000-000000000009';

  const setUp = () => {
    let reads = 0;
    let renders = 0;
    // The job in the payload counts how often a body is rendered from it.
    const job = { id: 'j', toJSON: () => (renders++, { id: 'j' }) };
    let kept = true;
    const sql = (async (text: string) => {
      if (!kept) return [];
      if (!text.includes('payload')) return [{}]; // whether the event is still kept
      reads++;
      return [{ tenant_id: tenantId, id: eventId, seq: '1', name: 'bulk_job.completed', audience: { job_credential: 'c' }, payload: { job }, created_at: '2026-01-01T00:00:00.000Z' }];
    }) as never;
    let principal: Principal | null = admin;
    let catalog = {};
    const credentials = { principalById: async () => principal };
    const types = { catalog: async () => catalog };
    const fanout = new WebhookFanout({} as never, credentials as never, types as never, {} as never);
    return {
      recheck: () => fanout.recheck(tenantId, eventId, 'c', null, sql),
      counts: () => ({ reads, renders }),
      narrow: (p: Principal | null) => (principal = p),
      newTypes: () => (catalog = {}),
      dropEvent: () => (kept = false),
    };
  };

  it('shares one read and one rendering among the attempts of one event for one owner', async () => {
    const t = setUp();
    // Three at once (retries due together), then one after.
    const bodies = [...(await Promise.all([t.recheck(), t.recheck(), t.recheck()])), await t.recheck()];
    expect(bodies.map((b) => b?.body?.toString())).toEqual(Array(4).fill('{"event":"bulk_job.completed","job":{"id":"j"}}'));
    expect(bodies[3]?.body).toBe(bodies[0]?.body); // one Buffer, which undici sends as it is
    expect(t.counts()).toEqual({ reads: 1, renders: 1 });
    // Its event gone since (the janitor): nothing to send, as when it is read afresh.
    t.dropEvent();
    expect(await t.recheck()).toEqual({});
  });

  it('renders again for an owner that changed, and under a new type catalogue; a revoked one gets nothing', async () => {
    const t = setUp();
    await t.recheck();
    t.narrow({ ...admin, role: 'member', typePermissions: {} } as unknown as Principal);
    await t.recheck();
    expect(t.counts().reads).toBe(2);
    t.newTypes();
    await t.recheck();
    expect(t.counts().reads).toBe(3);
    t.narrow(null);
    expect(await t.recheck()).toBeNull();
    expect(t.counts().reads).toBe(3);
  });
});

describe('RecentBodies (later attempts\' bodies shared)', () => {
  const types = {} as never;
  const body = (bytes: number) => async () => ({ body: Buffer.alloc(bytes) });

  afterEach(() => jest.useRealTimers());

  it('keeps at most its cap once renderings under way together are done, and nothing once they expire', async () => {
    jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate'] });
    const recent = new RecentBodies();
    // 60 bodies of 1 MB rendered at once: none is counted before it is done.
    const shared = Array.from({ length: 60 }, (_, i) => recent.share(`k${i}`, types, body(1024 * 1024)).result);
    await Promise.all(shared);
    expect(recent.held.bytes).toBeLessThanOrEqual(32 * 1024 * 1024);
    recent.share('late', types, body(1024));
    await Promise.resolve();
    await new Promise(setImmediate);
    // Idle: no later share comes, and still nothing is kept past its 10 s.
    jest.advanceTimersByTime(10_001);
    expect(recent.held).toEqual({ entries: 0, bytes: 0 });
  });

  it('keeps a newer body under a key whose older body the cap let go, for its own 10 s', async () => {
    jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate'] });
    const recent = new RecentBodies();
    // Its own rendering takes the total past the cap: the trim lets every body go, this one too.
    await Promise.all(Array.from({ length: 32 }, (_, i) => recent.share(`k${i}`, types, body(1024 * 1024)).result));
    await recent.share('key', types, body(1024 * 1024)).result;
    await new Promise(setImmediate);
    jest.advanceTimersByTime(5_000);
    const newer = recent.share('key', types, body(1024));
    expect(newer.shared).toBe(false);
    await newer.result;
    await new Promise(setImmediate);
    // Past the older body's 10 s, within the newer one's.
    jest.advanceTimersByTime(6_000);
    expect(recent.share('key', types, body(1024)).shared).toBe(true);
  });
});
