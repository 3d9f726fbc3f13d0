/**
 * The fast-check commands of test/events-model.e2e-spec.ts and what the spec checks at the end of
 * a run. Each command makes one change as the tenant's admin key, or as M for some bulk actions
 * (an item written, patched, moved, trashed or purged, the move also by a bulk action with or
 * without events; tags and extensions through /metadata; bulk actions, direct or as jobs; an edge
 * added, also by an item's `edges`, or removed; a webhook enabled, disabled or re-filtered; key N
 * narrowed or revoked), checks the answer, and tells the model (./events-model.ts) which events that change owes to whom. A change to a webhook or a key is made either once the service is idle
 * or with events in flight, which may then go out as before or as after it (`change`).
 */
import { createHmac } from 'node:crypto';
import fc from 'fast-check';
import type { Response } from 'supertest';
import type { Api } from '../items/helpers';
import type { TestApp } from './app';
import {
  ANCESTORS, Due, EDGE_TYPES, EdgeType, EVENT_PATTERNS, ITEM_TYPES, ItemType, JobEnd, matchesPattern, MEdge, MItem, Model, N_NARROWINGS, Namespace, Owed, owedKey, Owner, plusMs, stamp, State,
  TYPE_FILTERS,
} from './events-model';
import type { Receiver } from './receiver';
import type { SseClient } from './sse';
import { waitFor } from './wait';

export interface Real {
  t: TestApp;
  tenantId: string;
  /** Indexes (in `receiver.requests`) of the requests the receiver refused with a 500. */
  refused: Set<number>;
  admin: Api;
  /** Member key M, which writes notes: it starts some of the bulk actions. */
  m: Api;
  /** Key N's id, for PATCH and DELETE /keys/{id}. */
  nKeyId: string;
  receiver: Receiver;
  streams: SseClient[];
}

type Cmd = fc.AsyncCommand<Model, Real, boolean>;

/** The n-th newest: small n, drawn most often, keep a run working on the same few items. */
const pick = <T>(xs: T[], n: number): T => xs[xs.length - 1 - (n % xs.length)];

function expectStatus(res: Response, status: number, what: string): void {
  if (res.status !== status) throw new Error(`${what}: expected ${status}, got ${res.status} ${(res.text ?? '').slice(0, 400)}`);
}

/**
 * Every committed event relayed (docs/events.md: an event stays undispatched until all of its
 * deliveries are recorded) and no delivery of an enabled webhook pending: each has had every
 * attempt it will get. A disabled webhook's pending retries wait for it to be enabled again.
 */
export async function settled(t: TestApp): Promise<void> {
  await waitFor(() => idle(t), 'the relay idle and no delivery pending', 30_000);
}

async function idle(t: TestApp): Promise<boolean> {
  const [{ n }] = await t.sql<{ n: number }>(
    `SELECT (SELECT count(*) FROM events WHERE dispatched_at IS NULL)
          + (SELECT count(*) FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id WHERE d.status = 'pending' AND NOT w.disabled) AS n`,
  );
  return Number(n) === 0;
}

/**
 * Tells the model which events are done: relayed, none of their deliveries pending (docs/events.md:
 * an event stays undispatched until all of its deliveries are recorded), and on every stream that
 * may get it, received. Events are named in the outbox by name, subject and, for items, version.
 */
async function settleSeen(m: Model, r: Real): Promise<void> {
  const rows = await r.t.sql<{ id: string; key: string; done: boolean }>(
    `SELECT e.id, e.name || ' ' || coalesce(e.payload->'item'->>'id', e.payload->'edge'->>'id', e.payload->'job'->>'id') || ' ' || coalesce(e.payload->'item'->>'version', '') AS key,
            e.dispatched_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id AND d.status = 'pending') AS done
       FROM events e WHERE e.tenant_id = $1`,
    [r.tenantId],
  );
  const byKey = new Map(rows.map((row) => [row.key, row]));
  const streamed = r.streams.map((s) => new Set(s.named().map((e) => e.id)));
  m.settleWhere((e) => {
    const row = byKey.get(`${e.name} ${e.subject} ${e.version ?? ''}`);
    return Boolean(row?.done) && e.streams.every((outcomes, i) => [...outcomes].every((o) => o === '') || streamed[i].has(row!.id));
  });
}

/** Whether a stream has received every event it must get (those it may get or not aside). */
export function streamHasRequired(m: Model, r: Real, i: number): boolean {
  const got = r.streams[i].named().map((e) => bodyToGot(e.id ?? '', e.body));
  return m.dues('streams', i).every((d) => d.outcomes.has('') || got.some((g) => g.name === d.name && g.subject === d.subject));
}

/**
 * The service idle (every event settled, each stream holding what it must get so far), and the
 * model told which events are done (not those with a retry waiting for a disabled webhook). Streams are written after publication, which the relay finished before it went
 * idle: their bytes may still be on the way. What never comes is reported at the end of the run.
 */
export async function quiesce(m: Model, r: Real): Promise<void> {
  await settled(r.t);
  await waitFor(() => m.streams.every((_, i) => streamHasRequired(m, r, i)), 'every stream to have what it must get so far', 10_000).catch(() => undefined);
  await settleSeen(m, r);
}

/**
 * A change to a webhook or a key, made either once the service is idle or while events are in
 * flight (`settleFirst`): the README promises the change for attempts not yet started once it is
 * answered ("An attempt already under way cannot be recalled"), and a stream follows its key from
 * the moment the change is acknowledged, so an event written before may go out either way.
 */
async function change(m: Model, r: Real, settleFirst: boolean, send: () => Promise<Response>, apply: () => void, what: string): Promise<void> {
  if (settleFirst) await quiesce(m, r);
  // Without waiting: the events seen to have reached whom they reach are out of the change's reach, so the model's "either way" keeps to those in flight.
  else await settleSeen(m, r);
  const res = await send();
  if (res.status !== 200 && res.status !== 204) expectStatus(res, 200, what);
  apply();
  m.reconsider();
}

const writable = (m: Model) => m.live().filter((i) => i.state !== 'trashed');

class CreateItem implements Cmd {
  constructor(readonly type: ItemType, readonly ext: Namespace[]) {}
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    const n = ++m.tick;
    const extensions = Object.fromEntries(this.ext.map((ns) => [ns, { v: n }]));
    const res = await r.admin.post('/items', { type: this.type, properties: { title: `t${n}` }, extensions, timestamp: stamp(n) });
    expectStatus(res, 201, this.toString());
    const item: MItem = { id: res.body.id, type: this.type, title: `t${n}`, extensions, tags: [], tier: res.body.tier, state: 'active', version: res.body.version, n, purged: false };
    m.items.push(item);
    m.emitItem('item.created', item);
  }
  toString = () => `create(${this.type}${this.ext.length ? `, ext ${this.ext.join('+')}` : ''})`;
}

/**
 * An item created with an edge in its `edges` (README: `edge.created` for "an item write's
 * `edges`"): `item.created`, its body showing the edge, and `edge.created`.
 */
class CreateLinked implements Cmd {
  constructor(readonly type: ItemType, readonly edgeType: EdgeType, readonly idx: number) {}
  check = (m: Readonly<Model>) => writable(m as Model).length > 0;
  async run(m: Model, r: Real): Promise<void> {
    const target = pick(writable(m), this.idx);
    const n = ++m.tick;
    const res = await r.admin.post('/items', { type: this.type, properties: { title: `t${n}` }, edges: { [this.edgeType]: [target.id] }, timestamp: stamp(n) });
    expectStatus(res, 201, `${this}: -> ${target.id}`);
    const item: MItem = { id: res.body.id, type: this.type, title: `t${n}`, extensions: {}, tags: [], tier: res.body.tier, state: 'active', version: res.body.version, n, purged: false };
    const listed = await r.admin.get(`/items/${item.id}/edges`, { direction: 'outgoing' });
    expectStatus(listed, 200, `${this}: its edges`);
    const ids = (listed.body.edges as Array<{ id: string; type: string; target_id: string }>).filter((e) => e.type === this.edgeType && e.target_id === target.id);
    if (ids.length !== 1) throw new Error(`${this}: expected the one edge it was created with, got ${JSON.stringify(listed.body.edges)}`);
    const edge: MEdge = { id: ids[0].id, type: this.edgeType, source: item, target, gone: false };
    m.items.push(item);
    m.edges.push(edge);
    m.emitItem('item.created', item);
    m.emitEdge('edge.created', edge);
  }
  toString = () => `create linked(${this.type}, ${this.edgeType} -> #${this.idx})`;
}

class UpdateItem implements Cmd {
  constructor(readonly idx: number) {}
  check = (m: Readonly<Model>) => writable(m as Model).length > 0;
  async run(m: Model, r: Real): Promise<void> {
    const item = pick(writable(m), this.idx);
    const title = `t${++m.tick}`;
    const res = await r.admin.patch(`/items/${item.id}`, { version: item.version, properties: { title } });
    expectStatus(res, 200, `${this} of ${item.id}`);
    item.title = title;
    item.version = res.body.version;
    m.emitItem('item.updated', item);
  }
  toString = () => `update(#${this.idx})`;
}

/** Adds the namespace where the item has none, removes it where it has one (README: tags and extensions through /metadata are an `item.updated`). */
class ToggleExtension implements Cmd {
  constructor(readonly idx: number, readonly ns: Namespace) {}
  check = (m: Readonly<Model>) => writable(m as Model).length > 0;
  async run(m: Model, r: Real): Promise<void> {
    const item = pick(writable(m), this.idx);
    const value = item.extensions[this.ns] ? null : { v: ++m.tick };
    const res = await r.admin.patch(`/items/${item.id}/metadata`, { extensions: { [this.ns]: value } });
    expectStatus(res, 200, `${this} of ${item.id}`);
    if (value) item.extensions[this.ns] = value;
    else delete item.extensions[this.ns];
    item.version += 1;
    m.emitItem('item.updated', item);
  }
  toString = () => `toggle extension(#${this.idx}, ${this.ns})`;
}

/** Adds the tag where the item lacks it, removes it where it has it, through /metadata: an `item.updated` whose body shows the tags. */
class ToggleTag implements Cmd {
  constructor(readonly idx: number, readonly tag: string) {}
  check = (m: Readonly<Model>) => writable(m as Model).length > 0;
  async run(m: Model, r: Real): Promise<void> {
    const item = pick(writable(m), this.idx);
    const has = item.tags.includes(this.tag);
    const res = await r.admin.patch(`/items/${item.id}/metadata`, has ? { remove_tags: [this.tag] } : { add_tags: [this.tag] });
    expectStatus(res, 200, `${this} of ${item.id}`);
    item.tags = has ? item.tags.filter((t) => t !== this.tag) : [...item.tags, this.tag];
    item.version += 1;
    m.emitItem('item.updated', item);
  }
  toString = () => `toggle tag(#${this.idx}, ${this.tag})`;
}

/** A PATCH of `state` (README "Lifecycle": active and archived move freely, trashed only back to active). */
class Move implements Cmd {
  constructor(readonly idx: number, readonly to: 'active' | 'archived') {}
  check = (m: Readonly<Model>) => m.items.some((i) => !i.purged);
  async run(m: Model, r: Real): Promise<void> {
    const item = pick(m.live(), this.idx);
    if (item.state === this.to || (item.state === 'trashed' && this.to === 'archived')) return;
    const res = await r.admin.patch(`/items/${item.id}`, { version: item.version, state: this.to });
    expectStatus(res, 200, `${this} of ${item.id} (${item.state})`);
    item.state = this.to as State;
    item.version = res.body.version;
    m.emitItem('item.state_changed', item);
  }
  toString = () => `move(#${this.idx} to ${this.to})`;
}

/** The same move as a bulk `transition` of one item; with `emit_events: false` it records no event (SPEC 6.4). */
class BulkMove implements Cmd {
  constructor(readonly idx: number, readonly to: 'active' | 'archived', readonly emit: boolean) {}
  check = (m: Readonly<Model>) => m.items.some((i) => !i.purged);
  async run(m: Model, r: Real): Promise<void> {
    const item = pick(m.live(), this.idx);
    if (item.state === this.to || (item.state === 'trashed' && this.to === 'archived')) return;
    const ts = stamp(item.n);
    const res = await r.admin.post('/items/bulk_action', { action: 'transition', to_state: this.to, emit_events: this.emit, filter: { since: ts, until: plusMs(ts, 1), state: 'all' } });
    expectStatus(res, 200, `${this} of ${item.id} (${item.state})`);
    if (res.body.succeeded !== 1) throw new Error(`${this}: expected one item moved, got ${JSON.stringify(res.body)}`);
    item.state = this.to;
    // The body names no version: read it back for the next PATCH.
    const read = await r.admin.get(`/items/${item.id}`);
    expectStatus(read, 200, `${this}: read back ${item.id}`);
    item.version = read.body.version;
    if (this.emit) m.emitItem('item.state_changed', item);
  }
  toString = () => `bulk move(#${this.idx} to ${this.to}${this.emit ? '' : ', emit_events false'})`;
}

class Trash implements Cmd {
  constructor(readonly idx: number) {}
  check = (m: Readonly<Model>) => writable(m as Model).length > 0;
  async run(m: Model, r: Real): Promise<void> {
    const item = pick(writable(m), this.idx);
    const res = await r.admin.delete(`/items/${item.id}`);
    expectStatus(res, 200, `${this} of ${item.id}`);
    item.state = 'trashed';
    item.version = res.body.version ?? item.version + 1;
    m.emitItem('item.state_changed', item);
  }
  toString = () => `trash(#${this.idx})`;
}

/** A bulk purge of one item (a one-millisecond window on its timestamp): `item.deleted`, and `edge.deleted` for each edge it removes. */
class Purge implements Cmd {
  constructor(readonly idx: number) {}
  check = (m: Readonly<Model>) => m.items.some((i) => !i.purged);
  async run(m: Model, r: Real): Promise<void> {
    const item = pick(m.live(), this.idx);
    const ts = stamp(item.n);
    const res = await r.admin.post('/items/bulk_action', { action: 'purge', confirm: 'PURGE', filter: { since: ts, until: plusMs(ts, 1), state: 'all' } });
    expectStatus(res, 200, `${this} of ${item.id}`);
    if (res.body.succeeded !== 1) throw new Error(`${this}: expected one item purged, got ${JSON.stringify(res.body)}`);
    item.purged = true;
    m.emitItem('item.deleted', item);
    for (const e of m.liveEdges()) {
      if (e.source !== item && e.target !== item) continue;
      e.gone = true;
      m.emitEdge('edge.deleted', e);
    }
  }
  toString = () => `purge(#${this.idx})`;
}

export type BulkKind = 'update_tags' | 'update_tier' | 'update_properties' | 'transition' | 'purge';
export type BulkMode = 'direct' | 'job' | 'cancelled job';
/** The spec's app runs at most this many matches in the request (README `BULK_SYNC_MAX`): a larger window goes to a job unasked. */
export const BULK_SYNC_MAX = 2;
const TAGS = ['red', 'blue'];
const TIERS = ['library', 'feed'];

/**
 * A bulk action (README "Bulk actions") over a window of consecutive creations (on their
 * timestamps), perhaps narrowed by a type pattern, started by the admin or by M (a member: its
 * match set narrowed to the types it may write, core.note; `purge` is admin-only), run directly
 * (a job all the same past `BULK_SYNC_MAX` matches) or as a job (`async: true`), the job perhaps
 * cancelled as soon as it is accepted. Each changed item records `item.updated`
 * (`item.state_changed` for a move; `item.deleted` and an `edge.deleted` per edge for a purge)
 * unless `emit_events: false`; an item left as it was records nothing; a job's end is announced
 * either way, `bulk_job.<status>`, to the job's credential and admins. The items are read back:
 * each changed one is at `version` + 1.
 */
class BulkAction implements Cmd {
  constructor(
    readonly kind: BulkKind, readonly caller: Owner, readonly from: number, readonly width: number,
    readonly typePattern: string | undefined, readonly arg: number, readonly emit: boolean, readonly mode: BulkMode,
  ) {}
  check = (m: Readonly<Model>) => m.items.some((i) => !i.purged);
  async run(m: Model, r: Real): Promise<void> {
    const by: Owner = this.kind === 'purge' ? 'admin' : this.caller;
    const client = by === 'admin' ? r.admin : r.m;
    const live = [...m.live()].sort((a, b) => a.n - b.n);
    const start = live.length - 1 - (this.from % live.length);
    const window = live.slice(start, start + this.width);
    const [first, last] = [window[0], window[window.length - 1]];
    const anyState = this.kind === 'transition' || this.kind === 'purge';
    const matched = window.filter((i) =>
      (anyState || i.state === 'active')
      && (!this.typePattern || matchesPattern(this.typePattern, i.type, ANCESTORS[i.type]))
      && m.canWriteType(by, i.type));
    const tag = TAGS[this.arg % 2];
    const addTag = this.arg < 2;
    const tier = TIERS[this.arg % 2];
    const title = `b${++m.tick}`;
    const to: State = this.arg % 2 ? 'archived' : 'active';
    const fields: Record<BulkKind, Record<string, unknown>> = {
      update_tags: addTag ? { add_tags: [tag], remove_tags: [] } : { remove_tags: [tag] },
      update_tier: { tier },
      update_properties: { properties: { title } },
      transition: { to_state: to },
      purge: { confirm: 'PURGE' },
    };
    /** What the action does to one item: 'changed', 'same' (succeeded, not rewritten) or 'error'. */
    const effect = (i: MItem): 'changed' | 'same' | 'error' => {
      switch (this.kind) {
        case 'update_tags': return i.tags.includes(tag) === addTag ? 'same' : 'changed';
        case 'update_tier': return i.tier === tier ? 'same' : 'changed';
        case 'transition': return i.state === to ? 'same' : i.state === 'trashed' && to === 'archived' ? 'error' : 'changed';
        default: return 'changed';
      }
    };
    const effects = matched.map(effect);
    const errored = effects.filter((e) => e === 'error').length;
    const filter = {
      since: stamp(first.n), until: plusMs(stamp(last.n), 1), ...(anyState ? { state: 'all' } : {}), ...(this.typePattern ? { type: this.typePattern } : {}),
    };
    const body = { action: this.kind, ...fields[this.kind], filter, emit_events: this.emit, ...(this.mode === 'direct' ? {} : { async: true }) };
    const res = await client.post('/items/bulk_action', body);
    const counts = (b: { matched: number; succeeded: number; errored: number }) => `${b.matched}/${b.succeeded}/${b.errored}`;
    const owed = `${matched.length}/${matched.length - errored}/${errored}`;
    let applied = true;
    if (this.mode === 'direct' && matched.length <= BULK_SYNC_MAX) {
      expectStatus(res, 200, `${this}: ${JSON.stringify(body)}`);
      if (counts(res.body) !== owed) throw new Error(`${this}: matched/succeeded/errored ${counts(res.body)}, the model says ${owed} (${JSON.stringify(body)})`);
    } else {
      expectStatus(res, 202, `${this}: ${JSON.stringify(body)}`);
      const jobId: string = res.body.id;
      let cancelledQueued = false;
      if (this.mode === 'cancelled job') {
        const cancel = await client.delete(`/items/bulk_action/jobs/${jobId}`);
        expectStatus(cancel, 200, `${this}: cancel ${jobId}`);
        // SPEC 3.2: a queued job is cancelled "immediately"; one under way at its next chunk boundary.
        cancelledQueued = cancel.body.status === 'cancelled';
      }
      let job: any;
      await waitFor(async () => {
        const got = await client.get(`/items/bulk_action/jobs/${jobId}`);
        expectStatus(got, 200, `${this}: job ${jobId}`);
        job = got.body;
        return ['completed', 'failed', 'cancelled'].includes(job.status);
      }, `${this}: job ${jobId} to end`, 30_000);
      const end = job.status as JobEnd;
      // Cancelled while queued, nothing was done; at the chunk boundary (the only chunk here), everything was.
      applied = end !== 'cancelled' || job.processed > 0;
      if (cancelledQueued && applied) throw new Error(`${this}: job ${jobId} cancelled while queued, then processed ${job.processed} items: ${JSON.stringify(job)}`);
      if (end === 'failed' || (this.mode !== 'cancelled job' && end !== 'completed')) throw new Error(`${this}: job ended ${end}: ${JSON.stringify(job)}`);
      if (applied && counts(job) !== owed) throw new Error(`${this}: job ${end} with matched/succeeded/errored ${counts(job)}, the model says ${owed}`);
      m.emitJob(end, jobId, by);
    }
    if (!applied) return;
    matched.forEach((item, k) => {
      if (effects[k] !== 'changed') return;
      if (this.kind === 'purge') {
        item.purged = true;
        const touching = m.liveEdges().filter((e) => e.source === item || e.target === item);
        touching.forEach((e) => (e.gone = true));
        if (!this.emit) return;
        m.emitItem('item.deleted', item);
        touching.forEach((e) => m.emitEdge('edge.deleted', e));
        return;
      }
      if (this.kind === 'update_tags') item.tags = addTag ? [...item.tags, tag] : item.tags.filter((t) => t !== tag);
      if (this.kind === 'update_tier') item.tier = tier;
      if (this.kind === 'update_properties') item.title = title;
      if (this.kind === 'transition') item.state = to;
      item.version += 1;
      if (this.emit) m.emitItem(this.kind === 'transition' ? 'item.state_changed' : 'item.updated', item);
    });
    for (const item of window.filter((i) => !i.purged)) {
      const read = await r.admin.get(`/items/${item.id}`);
      expectStatus(read, 200, `${this}: read back ${item.id}`);
      const b = read.body;
      const want = { version: item.version, state: item.state, tier: item.tier, title: item.title, tags: [...item.tags].sort() };
      const got = { version: b.version, state: b.state, tier: b.tier, title: b.properties?.title, tags: [...(b.tags ?? [])].sort() };
      if (JSON.stringify(want) !== JSON.stringify(got)) throw new Error(`${this}: ${item.id} is ${JSON.stringify(got)}, the model says ${JSON.stringify(want)}`);
    }
  }
  toString = () =>
    `bulk ${this.kind}(${this.kind === 'purge' ? 'admin' : this.caller}, #${this.from}+${this.width}${this.typePattern ? ` type ${this.typePattern}` : ''}, arg ${this.arg}${this.emit ? '' : ', emit_events false'}, ${this.mode})`;
}

class AddEdge implements Cmd {
  constructor(readonly type: EdgeType, readonly a: number, readonly b: number) {}
  check = (m: Readonly<Model>) => writable(m as Model).length > 1;
  async run(m: Model, r: Real): Promise<void> {
    const items = writable(m);
    const source = pick(items, this.a);
    // A different item for the target, so that a drawn self-link still adds an edge.
    const target = pick(items, this.a === this.b ? this.b + 1 : this.b);
    if (source === target || m.liveEdges().some((e) => e.type === this.type && e.source === source && e.target === target)) return;
    const res = await r.admin.post('/edges', { type: this.type, source_id: source.id, target_id: target.id });
    expectStatus(res, 201, `${this}: ${source.id} -> ${target.id}`);
    const edge: MEdge = { id: res.body.id, type: this.type, source, target, gone: false };
    m.edges.push(edge);
    m.emitEdge('edge.created', edge);
  }
  toString = () => `add edge(${this.type}, #${this.a} -> #${this.b})`;
}

class RemoveEdge implements Cmd {
  constructor(readonly idx: number) {}
  check = (m: Readonly<Model>) => m.edges.some((e) => !e.gone);
  async run(m: Model, r: Real): Promise<void> {
    const edge = pick(m.liveEdges(), this.idx);
    const res = await r.admin.delete(`/edges/${edge.id}`);
    if (res.status !== 200 && res.status !== 204) expectStatus(res, 200, `${this}: ${edge.id}`);
    edge.gone = true;
    m.emitEdge('edge.deleted', edge);
  }
  toString = () => `remove edge(#${this.idx})`;
}

/** PATCH /webhooks/{id} `disabled` (SPEC 4.6), by the tenant's admin, who sees every webhook of the tenant. */
class ToggleHook implements Cmd {
  constructor(readonly idx: number, readonly settleFirst: boolean) {}
  check = (m: Readonly<Model>) => m.hooks.length > 0;
  async run(m: Model, r: Real): Promise<void> {
    const hook = m.hooks[this.idx % m.hooks.length];
    await change(m, r, this.settleFirst, () => r.admin.patch(`/webhooks/${hook.id}`, { disabled: !hook.disabled }), () => (hook.disabled = !hook.disabled), `${this}: ${hook.id}`);
  }
  toString = () => `toggle webhook(${this.idx}${this.settleFirst ? ', settled' : ''})`;
}

class RefilterHook implements Cmd {
  constructor(readonly idx: number, readonly events: string[], readonly typeFilter: string[] | null, readonly settleFirst: boolean) {}
  check = (m: Readonly<Model>) => m.hooks.length > 0;
  async run(m: Model, r: Real): Promise<void> {
    const hook = m.hooks[this.idx % m.hooks.length];
    const apply = () => {
      hook.events = this.events;
      hook.typeFilter = this.typeFilter;
    };
    await change(m, r, this.settleFirst, () => r.admin.patch(`/webhooks/${hook.id}`, { events: this.events, type_filter: this.typeFilter }), apply, `${this}: ${hook.id}`);
  }
  toString = () => `refilter webhook(${this.idx}, events ${this.events.join(',')}, type_filter ${this.typeFilter?.join(',') ?? 'null'}${this.settleFirst ? ', settled' : ''})`;
}

/** PATCH /keys/{N} with narrower maps: its webhooks and stream get, from then on, only what the narrowed key may read. */
class NarrowN implements Cmd {
  constructor(readonly idx: number, readonly settleFirst: boolean) {}
  check = (m: Readonly<Model>) => m.perms.N !== null;
  async run(m: Model, r: Real): Promise<void> {
    const perms = N_NARROWINGS[this.idx % N_NARROWINGS.length];
    await change(m, r, this.settleFirst, () => r.admin.patch(`/keys/${r.nKeyId}`, perms), () => (m.perms.N = perms), this.toString());
  }
  toString = () => `narrow N(${this.idx % N_NARROWINGS.length}${this.settleFirst ? ', settled' : ''})`;
}

/** DELETE /keys/{N}: its webhooks and stream get nothing from then on. */
class RevokeN implements Cmd {
  constructor(readonly settleFirst: boolean) {}
  check = (m: Readonly<Model>) => m.perms.N !== null;
  async run(m: Model, r: Real): Promise<void> {
    await change(m, r, this.settleFirst, () => r.admin.delete(`/keys/${r.nKeyId}`), () => (m.perms.N = null), this.toString());
  }
  toString = () => `revoke N${this.settleFirst ? ' (settled)' : ''}`;
}

const idx = fc.nat({ max: 7 });
const ns = fc.constantFrom<Namespace>('pub.ns', 'sec.ns');

export const create = fc.tuple(fc.constantFrom(...ITEM_TYPES), fc.subarray<Namespace>(['pub.ns', 'sec.ns'])).map(([t, e]): Cmd => new CreateItem(t, e));
const addEdge = fc.tuple(fc.constantFrom(...EDGE_TYPES), idx, idx).map(([t, a, b]): Cmd => new AddEdge(t, a, b));
const createLinked = fc.tuple(fc.constantFrom(...ITEM_TYPES), fc.constantFrom(...EDGE_TYPES), idx).map(([t, e, i]): Cmd => new CreateLinked(t, e, i));
const bulkAction = fc
  .record({
    kind: fc.constantFrom<BulkKind>('update_tags', 'update_tags', 'update_tier', 'update_properties', 'transition', 'purge'),
    caller: fc.constantFrom<Owner>('admin', 'M'),
    from: idx,
    width: fc.integer({ min: 1, max: 4 }),
    typePattern: fc.constantFrom(undefined, undefined, 'core.note', 'acme.base.*'),
    arg: fc.nat({ max: 3 }),
    emit: fc.boolean(),
    mode: fc.constantFrom<BulkMode>('direct', 'job', 'job', 'cancelled job'),
  })
  .map((b): Cmd => new BulkAction(b.kind, b.caller, b.from, b.width, b.typePattern, b.arg, b.emit, b.mode));

/** Writes drawn most often; a change to a webhook or to key N less often, N's revocation (which ends its part of the run) least. */
export const COMMANDS: Array<fc.Arbitrary<Cmd>> = [
  create,
  create,
  create,
  idx.map((i) => new UpdateItem(i)),
  fc.tuple(idx, ns).map(([i, n]) => new ToggleExtension(i, n)),
  fc.tuple(idx, fc.constantFrom(...TAGS)).map(([i, tag]) => new ToggleTag(i, tag)),
  createLinked,
  bulkAction,
  bulkAction,
  fc.tuple(idx, fc.constantFrom<'active' | 'archived'>('active', 'archived')).map(([i, to]) => new Move(i, to)),
  fc.tuple(idx, fc.constantFrom<'active' | 'archived'>('active', 'archived'), fc.boolean()).map(([i, to, e]) => new BulkMove(i, to, e)),
  idx.map((i) => new Trash(i)),
  idx.map((i) => new Purge(i)),
  addEdge,
  addEdge,
  idx.map((i) => new RemoveEdge(i)),
  fc.oneof(
    fc.tuple(idx, fc.boolean()).map(([i, s]): Cmd => new ToggleHook(i, s)),
    fc.tuple(idx, fc.constantFrom(...EVENT_PATTERNS), fc.constantFrom(...TYPE_FILTERS), fc.boolean()).map(([i, e, tf, s]): Cmd => new RefilterHook(i, e, tf, s)),
  ),
  fc.oneof(
    { weight: 3, arbitrary: fc.tuple(idx, fc.boolean()).map(([i, s]): Cmd => new NarrowN(i, s)) },
    { weight: 1, arbitrary: fc.boolean().map((s): Cmd => new RevokeN(s)) },
  ),
];

/** One received event, as the comparison sees it. */
export interface Got {
  eventId: string;
  name: string;
  subject: string;
  extensions?: string[];
  edges?: string[];
  tags?: string[];
}

/**
 * Compares what a receiver got, deduplicated on the event id (at least once, SPEC 6.3.1), with
 * what the model says it may get: every event it must get exactly once, any it may get at most once.
 */
export function compareDues(label: string, got: Got[], dues: Due[]): string[] {
  const problems: string[] = [];
  const byId = new Map<string, Got>();
  for (const g of got) {
    const seen = byId.get(g.eventId);
    // An event id names one event: every copy of it must be about the same event.
    if (seen && `${seen.name} ${seen.subject}` !== `${g.name} ${g.subject}`) problems.push(`${label}: event id ${g.eventId} carried both ${seen.name} ${seen.subject} and ${g.name} ${g.subject}`);
    byId.set(g.eventId, g);
  }
  // Those it must get first, so that an event it may get does not take another's place.
  const open = [...dues].sort((a, b) => Number(a.outcomes.has('')) - Number(b.outcomes.has('')));
  const extra: string[] = [];
  for (const g of byId.values()) {
    const key = owedKey(g as Owed);
    const at = open.findIndex((d) => d.outcomes.has(key));
    if (at >= 0) open.splice(at, 1);
    else extra.push(key);
  }
  const missing = open.filter((d) => !d.outcomes.has('')).map((d) => [...d.outcomes].join(' or '));
  if (missing.length || extra.length) problems.push(`${label}: missing [${missing.join('; ')}], unexpected [${extra.join('; ')}]`);
  return problems;
}

/**
 * Parses a webhook's requests: signature (SPEC 6.2) and headers (6.1) of every attempt, and, of
 * those the receiver accepted, the body's event, subject, extension namespaces and edges.
 */
export function receivedByHook(r: Real, path: string, secret: string, label: string, problems: string[]): Got[] {
  const got: Got[] = [];
  const names = new Map<string, string>();
  r.receiver.requests.forEach((req, index) => {
    if (req.path !== path) return;
    const body = JSON.parse(req.body);
    const sig = String(req.headers['x-svc-signature'] ?? '');
    const t = /(?:^|,)t=(\d+)/.exec(sig)?.[1];
    const expected = createHmac('sha256', secret).update(`${t}.${req.body}`).digest('hex');
    if (!t || !sig.split(',').some((p) => p === `v1=${expected}`)) problems.push(`${label}: a delivery's signature does not verify (${sig})`);
    if (req.headers['x-svc-event'] !== body.event) problems.push(`${label}: X-Svc-Event ${String(req.headers['x-svc-event'])} for a body of ${body.event}`);
    if (!String(req.headers['content-type']).startsWith('application/json')) problems.push(`${label}: Content-Type ${String(req.headers['content-type'])}`);
    const eventId = String(req.headers['x-svc-event-id'] ?? '');
    if (!eventId) problems.push(`${label}: a delivery without X-Svc-Event-Id`);
    const g = bodyToGot(eventId, body);
    // A retry carries the event's id again (README "Delivery"), its body rendered for the credential as it is then.
    const named = `${g.name} ${g.subject}`;
    if (names.has(eventId) && names.get(eventId) !== named) problems.push(`${label}: event id ${eventId} carried both ${names.get(eventId)} and ${named}`);
    names.set(eventId, named);
    if (!r.refused.has(index)) got.push(g);
  });
  return got;
}

/**
 * The receiver's answers: a 500 to the first attempt of about one event in eight at each webhook
 * (by the event id's first digit), so that retries, with the same X-Svc-Event-Id, are part of
 * every run; a 200 to everything else.
 */
export function refuseSome(receiver: Receiver, refused: Set<number>): void {
  const seen = new Set<string>();
  receiver.respond = (req, index) => {
    const id = String(req.headers['x-svc-event-id'] ?? '');
    const first = !seen.has(`${req.path} ${id}`);
    seen.add(`${req.path} ${id}`);
    if (!first || !/^[01]/.test(id)) return 200;
    refused.add(index);
    return 500;
  };
}

export function bodyToGot(eventId: string, body: any): Got {
  if (body.item) {
    const edges = Object.entries((body.item.edges ?? {}) as Record<string, string[]>).flatMap(([type, ids]) => ids.map((id) => `${type}:${id}`));
    return {
      eventId, name: body.event, subject: body.item.id, extensions: Object.keys(body.item.extensions ?? {}), ...(body.event === 'item.deleted' ? {} : { edges }), tags: body.item.tags ?? [],
    };
  }
  return { eventId, name: body.event, subject: body.edge?.id ?? body.job?.id ?? '?' };
}
