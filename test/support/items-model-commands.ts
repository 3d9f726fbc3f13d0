/**
 * The fast-check commands of test/items-model.e2e-spec.ts: each sends one request (or a paged
 * listing) to the real service as the tenant's admin or member key, says from the model
 * (./items-model.ts) which answers are right, checks the answer, and moves the model on.
 * Where the documents leave the precedence of two applicable errors open, every applicable
 * code is accepted; the state must be unchanged after any error.
 */
import fc from 'fast-check';
import type { Response } from 'supertest';
import type { Api } from '../items/helpers';
import {
  bump, canRead, canWrite, DEFAULT_TIER, EDGE_TYPES, EdgeType, edgeRead, edgeWrite, Extensions, extWrite, hasWord, ITEM_TYPES, ItemType, ListFilter,
  MAIN_KEY, matches, mayMove, mergeProps, mergeTags, MEdge, MItem, Model, move, NAMESPACES, plusMs, Props, REQUIRES_MAIN, sameJson, sameSet,
  PREFIX_WORD, SEARCH_WORDS, snapshot, TYPO_WORD, stamp, State, STATES, TAG_POOL, Tier, TIERS, visibleExtensions, Who,
} from './items-model';

export interface Real {
  as: Record<Who, Api>;
  /** Each key's `source`, stamped on the items it writes. */
  source: Record<Who, string>;
}

type Cmd = fc.AsyncCommand<Model, Real, boolean>;
type Expected = Array<[number, string]>;

/** The n-th newest: small n, drawn most often, keep a run working on the same few items and edges. */
const pick = <T>(xs: T[], n: number): T => xs[xs.length - 1 - (n % xs.length)];
const short = (res: Response) => `${res.status} ${(res.text ?? '').slice(0, 400)}`;

function fail(what: string, res?: Response): never {
  throw new Error(res ? `${what}; got ${short(res)}` : what);
}

/** The answer must be one of the expected errors, in the SPEC 2.9 envelope. */
function expectOneOf(res: Response, expected: Expected, what: string): void {
  const code = res.body?.error?.code;
  if (!expected.some(([s, c]) => res.status === s && code === c)) fail(`${what}: expected one of ${expected.map((e) => e.join(' ')).join(', ')}`, res);
  if (typeof res.body.error.message !== 'string') fail(`${what}: error without message`, res);
}

function expectStatus(res: Response, status: number, what: string): void {
  if (res.status !== status) fail(`${what}: expected ${status}`, res);
}

/** The item body must be the model's item, as `who` sees it. */
export function checkItem(m: Model, body: Record<string, any>, item: MItem, who: Who, what: string): void {
  const want = {
    id: item.id,
    type: item.type,
    state: item.state,
    version: item.version,
    properties: item.properties,
    tags: item.tags,
    source: item.source,
    source_id: item.sourceId ?? null,
    timestamp: Date.parse(item.timestamp),
    edges: m.edgesOf(item, who),
    tier: item.tier,
    extensions: visibleExtensions(who, item.extensions),
  };
  const got = {
    id: body.id,
    type: body.type,
    state: body.state,
    version: body.version,
    properties: body.properties,
    tags: body.tags,
    source: body.source,
    source_id: body.source_id ?? null,
    timestamp: Date.parse(body.timestamp),
    edges: body.edges,
    tier: body.tier,
    extensions: body.extensions,
  };
  if (!sameJson(want, got)) throw new Error(`${what}: item differs from the model\n  model:   ${JSON.stringify(want)}\n  service: ${JSON.stringify(got)}`);
}

/** Tags that differ from the current ones only in order: whether that is a change is not fixed by the documents. */
const reorderOnly = (a: string[], b: string[]) => sameSet(a, b) && !sameJson(a, b);

/**
 * Applies a successful write's version to the model: bumped when it changed something. When
 * only the tag order changed (`loose`), either answer is taken; unbumped, the service kept its order.
 */
function settleVersion(item: MItem, res: Response, changed: boolean, loose: boolean, what: string): void {
  if (loose && res.body.version === item.version && sameSet(res.body.tags ?? [], item.tags)) {
    item.tags = res.body.tags;
    return;
  }
  if (changed || loose) bump(item);
  if (res.body.version !== item.version) fail(`${what}: expected version ${item.version}`, res);
}

// ------------------------------------------------------------------------------ items

class CreateItem implements Cmd {
  constructor(
    readonly who: Who,
    readonly type: ItemType,
    readonly main: string,
    readonly body: string | undefined,
    readonly tags: string[] | undefined,
    readonly sourceId: string | undefined,
    readonly state: State | undefined,
    readonly edgeTo: number | undefined,
    readonly tier: Tier | undefined,
    readonly ext: Extensions | undefined,
  ) {}
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    const what = this.toString();
    const existing = this.sourceId !== undefined ? m.byNaturalKey(this.who, this.sourceId) : undefined;
    const target = this.edgeTo !== undefined && m.items.length ? pick(m.items, this.edgeTo) : undefined;
    const properties: Props = { [MAIN_KEY[this.type]]: this.main, ...(this.body !== undefined ? { body: this.body } : {}) };
    const timestamp = existing ? undefined : stamp(m.seq + 1);
    // Whether an upsert replaces or merges `extensions` is not fixed by the documents: only creations carry them.
    const ext = existing ? undefined : this.ext;
    const res = await r.as[this.who].post('/items', {
      type: this.type,
      properties,
      ...(this.tags ? { tags: this.tags } : {}),
      // A client-sent source is ignored (CONTRACT "Items"): the natural key stays the key's.
      ...(this.sourceId !== undefined ? { source_id: this.sourceId, source: 'forged-source' } : {}),
      ...(this.state && this.sourceId === undefined ? { state: this.state } : {}),
      ...(timestamp ? { timestamp } : {}),
      ...(target ? { edges: { 'm.rel': [target.id] } } : {}),
      ...(this.tier ? { tier: this.tier } : {}),
      ...(ext ? { extensions: ext } : {}),
    });
    const errors: Expected = [];
    if (!canRead(this.who, this.type)) errors.push([400, 'invalid_type']);
    else if (!canWrite(this.who, this.type)) errors.push([403, 'type_not_permitted']);
    // README "Natural key": an item's type cannot change.
    if (existing && existing.type !== this.type) errors.push([400, 'validation_error']);
    if (target && (target.purged || !canRead(this.who, target.type))) errors.push([404, 'item_not_found']);
    // docs "Lifecycle": new items start active or archived.
    if (this.sourceId === undefined && (this.state === 'trashed' || this.state === 'revoked')) errors.push([400, 'invalid_transition']);
    // docs "Permissions": writing an extension namespace without write is 403 forbidden.
    if (ext && Object.keys(ext).some((ns) => !extWrite(this.who, ns))) errors.push([403, 'forbidden']);
    if (errors.length) return expectOneOf(res, errors, what);

    let item: MItem;
    if (existing) {
      // SPEC 2.1 / 7.5: a taken natural key updates and answers 200, never 409.
      expectStatus(res, 200, what);
      item = existing;
      const tags = this.tags ?? item.tags;
      // README "Natural key": the given fields changed, an absent one kept (as in a PATCH).
      const tier = this.tier ?? item.tier;
      const loose = !sameJson(properties, item.properties) || tier !== item.tier ? false : reorderOnly(tags, item.tags);
      const changed = !sameJson(properties, item.properties) || !sameSet(tags, item.tags) || tier !== item.tier;
      item.properties = properties;
      item.tags = tags;
      item.tier = tier;
      settleVersion(item, res, changed, loose, what);
    } else {
      expectStatus(res, 201, what);
      m.seq += 1;
      item = {
        id: res.body.id,
        type: this.type,
        owner: this.who,
        source: r.source[this.who],
        sourceId: this.sourceId,
        properties,
        tags: this.tags ?? [],
        state: this.sourceId === undefined && this.state ? this.state : 'active',
        // SPEC 2.7: the key's default_tier for an item written without one.
        tier: this.tier ?? DEFAULT_TIER[this.who],
        extensions: { ...(ext ?? {}) },
        trashedFrom: null,
        version: 1,
        history: [],
        timestamp: timestamp!,
        purged: false,
      };
      item.history.push(snapshot(item));
      m.items.push(item);
    }
    // docs "Edge types and edges": edges of a write that already exist are kept.
    if (target && !m.liveEdges().some((e) => e.type === 'm.rel' && e.source === item && e.target === target)) {
      const listed = await r.as.admin.get(`/items/${item.id}/edges`, { direction: 'outgoing', type: 'm.rel', limit: 100 });
      expectStatus(listed, 200, `${what}: its edges`);
      const edge = (listed.body.edges as Array<Record<string, string>>).find((e) => e.target_id === target.id);
      if (!edge) fail(`${what}: the edge to ${target.id} was not created`, listed);
      m.edges.push({ id: edge.id, type: 'm.rel', source: item, target, gone: false });
    }
    checkItem(m, res.body, item, this.who, what);
  }
  toString = () =>
    `create(${this.who}, ${this.type}, ${JSON.stringify(this.main)}, body=${this.body}, tags=${JSON.stringify(this.tags)}, source_id=${this.sourceId}, state=${this.state}, edgeTo=${this.edgeTo}, tier=${this.tier}, ext=${JSON.stringify(this.ext)})`;
}

type VersionMode = 'fresh' | 'stale' | 'previous' | 'future';

function versionFor(item: MItem, mode: VersionMode, k: number): number {
  if (mode === 'previous' && item.version > 1) return item.version - 1;
  if (mode === 'stale' && item.version > 1) return 1 + (k % (item.version - 1));
  if (mode === 'future') return item.version + 1 + (k % 3);
  return item.version;
}

class PatchItem implements Cmd {
  constructor(
    readonly who: Who,
    readonly idx: number,
    readonly mode: VersionMode,
    readonly k: number,
    readonly props: { main?: string | null; body?: string | null } | undefined,
    readonly tags: string[] | undefined,
    readonly tier: Tier | undefined = undefined,
    readonly ext: Record<string, Props | null> | undefined = undefined,
  ) {}
  check = (m: Readonly<Model>) => m.items.length > 0;
  async run(m: Model, r: Real): Promise<void> {
    const item = pick(m.items, this.idx);
    const what = `${this.toString()} on ${item.id} (${item.type}, v${item.version}, ${item.tier}, ext ${JSON.stringify(item.extensions)})`;
    const version = versionFor(item, this.mode, this.k);
    const patch: Props = {};
    if (this.props?.main !== undefined) patch[MAIN_KEY[item.type]] = this.props.main;
    if (this.props?.body !== undefined) patch.body = this.props.body;
    const touchesProps = Object.keys(patch).length > 0;
    const touchesExt = this.ext !== undefined && Object.keys(this.ext).length > 0;
    const tags = this.tags ?? (touchesProps || touchesExt || this.tier ? undefined : []);
    const res = await r.as[this.who].patch(`/items/${item.id}`, {
      version,
      ...(touchesProps ? { properties: patch } : {}),
      ...(tags ? { tags } : {}),
      ...(this.tier ? { tier: this.tier } : {}),
      ...(touchesExt ? { extensions: this.ext } : {}),
    });
    if (item.purged || !canRead(this.who, item.type)) return expectOneOf(res, [[404, 'item_not_found']], what);
    const errors: Expected = [];
    if (!canWrite(this.who, item.type)) errors.push([403, 'type_not_permitted']);
    const stale = version !== item.version;
    // SPEC 9 / 7.6; docs "Optimistic concurrency": a stale patch is merged only when it touches nothing but tags, tier or state.
    if (stale && (touchesProps || touchesExt || version > item.version)) errors.push([409, 'version_conflict']);
    if (touchesExt && Object.keys(this.ext!).some((ns) => !extWrite(this.who, ns))) errors.push([403, 'forbidden']);
    const properties = touchesProps ? mergeProps(item.properties, patch) : item.properties;
    if (touchesProps && REQUIRES_MAIN[item.type] && properties[MAIN_KEY[item.type]] === undefined) errors.push([400, 'missing_required_field']);
    if (errors.length) {
      expectOneOf(res, errors, what);
      if (res.status === 409) this.checkConflict(res, item, version, patch, what);
      return;
    }
    expectStatus(res, 200, what);
    const newTags = tags === undefined ? item.tags : stale ? mergeTags(item.history[version - 1].tags, tags, item.tags) : tags;
    // docs "Optimistic concurrency": tier as sent, also when stale; extensions merge shallowly, `null` removing a namespace.
    const tier = this.tier ?? item.tier;
    const extensions = touchesExt ? (mergeProps(item.extensions, this.ext!) as Extensions) : item.extensions;
    const changed = !sameJson(properties, item.properties) || !sameSet(newTags, item.tags) || tier !== item.tier || !sameJson(extensions, item.extensions);
    const loose = !changed && reorderOnly(newTags, item.tags);
    item.properties = properties;
    item.tags = newTags;
    item.tier = tier;
    item.extensions = extensions;
    settleVersion(item, res, changed, loose, what);
    checkItem(m, res.body, item, this.who, what);
  }
  /** CONTRACT: details {current, ancestor, conflicting_fields, merge_policy}; docs: the touched fields that also changed since the ancestor. */
  private checkConflict(res: Response, item: MItem, version: number, patch: Props, what: string): void {
    const d = res.body.error.details;
    if (!d || d.current?.version !== item.version || !('merge_policy' in d) || !Array.isArray(d.conflicting_fields)) fail(`${what}: conflict details`, res);
    // The conflict shows the item as the caller may see it: no unreadable namespace.
    if (!sameJson(d.current.extensions, visibleExtensions(this.who, item.extensions))) fail(`${what}: current.extensions should be what ${this.who} sees`, res);
    if (version > item.version) return;
    const ancestor = item.history[version - 1];
    if (d.ancestor?.version !== version || !sameJson(d.ancestor.properties, ancestor.properties) || !sameJson(d.ancestor.tags, ancestor.tags)) {
      fail(`${what}: the ancestor should be version ${version} ${JSON.stringify(ancestor)}`, res);
    }
    if (!sameJson(d.ancestor.extensions, visibleExtensions(this.who, ancestor.extensions))) fail(`${what}: ancestor.extensions should be what ${this.who} sees`, res);
    const want = [
      ...Object.keys(patch).filter((k) => !sameJson(ancestor.properties[k] ?? null, item.properties[k] ?? null)).map((k) => `properties.${k}`),
      ...Object.keys(this.ext ?? {}).filter((k) => !sameJson(ancestor.extensions[k] ?? null, item.extensions[k] ?? null)).map((k) => `extensions.${k}`),
    ].sort();
    const got = (d.conflicting_fields as string[]).filter((f) => f.startsWith('properties.') || f.startsWith('extensions.')).sort();
    if (!sameJson(want, got)) fail(`${what}: conflicting_fields should name ${JSON.stringify(want)}`, res);
  }
  toString = () =>
    `patch(${this.who}, #${this.idx}, ${this.mode}/${this.k}, props=${JSON.stringify(this.props)}, tags=${JSON.stringify(this.tags)}, tier=${this.tier}, ext=${JSON.stringify(this.ext)})`;
}

/**
 * Two clients read the same version; the first writes tags, the second then sends its own
 * change based on the version both read: a stale tags-only patch merges (docs "Optimistic
 * concurrency"), one touching properties is a conflict.
 */
class TwoWriters implements Cmd {
  constructor(
    readonly who: Who,
    readonly idx: number,
    readonly first: string[],
    readonly second: string[],
    readonly props: { main?: string | null; body?: string | null } | undefined,
  ) {}
  check = (m: Readonly<Model>) => m.items.length > 0;
  async run(m: Model, r: Real): Promise<void> {
    const item = pick(m.items, this.idx);
    const before = item.version;
    await new PatchItem(this.who, this.idx, 'fresh', 0, undefined, this.first).run(m, r);
    if (item.version === before) return;
    await new PatchItem(this.who, this.idx, 'previous', 0, this.props, this.second).run(m, r);
  }
  toString = () => `twoWriters(${this.who}, #${this.idx}, ${JSON.stringify(this.first)} then stale ${JSON.stringify(this.second)}, props=${JSON.stringify(this.props)})`;
}

/**
 * PATCH /items/{id}/metadata with add_tags / remove_tags and extensions: no version needed; adds,
 * then removes (README); extensions merge shallowly, `null` removing a namespace, and need write
 * on each namespace named (README's route table).
 */
class MetadataTags implements Cmd {
  constructor(
    readonly who: Who,
    readonly idx: number,
    readonly add: string[],
    readonly remove: string[],
    readonly ext: Record<string, Props | null> | undefined = undefined,
  ) {}
  check = (m: Readonly<Model>) => m.items.length > 0;
  async run(m: Model, r: Real): Promise<void> {
    const item = pick(m.items, this.idx);
    const what = `${this.toString()} on ${item.id} (${item.type}, [${item.tags}], ext ${JSON.stringify(item.extensions)})`;
    const res = await r.as[this.who].patch(`/items/${item.id}/metadata`, { add_tags: this.add, remove_tags: this.remove, ...(this.ext ? { extensions: this.ext } : {}) });
    if (item.purged || !canRead(this.who, item.type)) return expectOneOf(res, [[404, 'item_not_found']], what);
    const errors: Expected = [];
    if (!canWrite(this.who, item.type)) errors.push([403, 'type_not_permitted']);
    if (this.ext && Object.keys(this.ext).some((ns) => !extWrite(this.who, ns))) errors.push([403, 'forbidden']);
    if (errors.length) return expectOneOf(res, errors, what);
    expectStatus(res, 200, what);
    const tags = [...item.tags];
    for (const t of this.add) if (!tags.includes(t)) tags.push(t);
    const next = tags.filter((t) => !this.remove.includes(t));
    const extensions = this.ext ? (mergeProps(item.extensions, this.ext) as Extensions) : item.extensions;
    const shown = visibleExtensions(this.who, extensions);
    if (res.body.item_id !== item.id || !sameJson(res.body.tags, next)) fail(`${what}: tags should be ${JSON.stringify(next)}`, res);
    if (!sameJson(res.body.extensions, shown)) fail(`${what}: extensions should be ${JSON.stringify(shown)}`, res);
    // A metadata patch to what is there is no new version (docs "Optimistic concurrency").
    if (!sameJson(next, item.tags) || !sameJson(extensions, item.extensions)) {
      item.tags = next;
      item.extensions = extensions;
      bump(item);
    }
  }
  toString = () => `metadata(${this.who}, #${this.idx}, add ${JSON.stringify(this.add)}, remove ${JSON.stringify(this.remove)}, ext ${JSON.stringify(this.ext)})`;
}

class Transition implements Cmd {
  constructor(readonly who: Who, readonly idx: number, readonly to: State, readonly stale: boolean, readonly k: number) {}
  check = (m: Readonly<Model>) => m.items.length > 0;
  async run(m: Model, r: Real): Promise<void> {
    const item = pick(m.items, this.idx);
    const what = `${this.toString()} on ${item.id} (${item.type}, ${item.state}${item.trashedFrom ? ` from ${item.trashedFrom}` : ''}, v${item.version})`;
    const version = versionFor(item, this.stale ? 'stale' : 'fresh', this.k);
    const res = await r.as[this.who].patch(`/items/${item.id}`, { version, state: this.to });
    if (item.purged || !canRead(this.who, item.type)) return expectOneOf(res, [[404, 'item_not_found']], what);
    const errors: Expected = [];
    if (!canWrite(this.who, item.type)) errors.push([403, 'type_not_permitted']);
    // SPEC 3.1 / 7.1 and the docs' table; a stale state-only patch is merged, then checked against the current state.
    if (!mayMove(item, this.to)) errors.push([400, 'invalid_transition']);
    if (errors.length) return expectOneOf(res, errors, what);
    expectStatus(res, 200, what);
    settleVersion(item, res, move(item, this.to), false, what);
    checkItem(m, res.body, item, this.who, what);
  }
  toString = () => `transition(${this.who}, #${this.idx}, → ${this.to}, ${this.stale ? `stale/${this.k}` : 'fresh'})`;
}

class Trash implements Cmd {
  constructor(readonly who: Who, readonly idx: number) {}
  check = (m: Readonly<Model>) => m.items.length > 0;
  async run(m: Model, r: Real): Promise<void> {
    const item = pick(m.items, this.idx);
    const what = `${this.toString()} on ${item.id} (${item.type}, ${item.state})`;
    const res = await r.as[this.who].delete(`/items/${item.id}`);
    if (item.purged || !canRead(this.who, item.type)) return expectOneOf(res, [[404, 'item_not_found']], what);
    if (!canWrite(this.who, item.type)) return expectOneOf(res, [[403, 'type_not_permitted']], what);
    if (!mayMove(item, 'trashed')) return expectOneOf(res, [[400, 'invalid_transition']], what);
    expectStatus(res, 200, what);
    settleVersion(item, res, move(item, 'trashed'), false, what);
    checkItem(m, res.body, item, this.who, what);
  }
  toString = () => `trash(${this.who}, #${this.idx})`;
}

/** Several lifecycle moves of one item in a row, to reach the deeper paths (revoked, then trashed, then restore). */
class Walk implements Cmd {
  constructor(readonly who: Who, readonly idx: number, readonly steps: Array<[State | 'delete', boolean]>) {}
  check = (m: Readonly<Model>) => m.items.length > 0;
  async run(m: Model, r: Real): Promise<void> {
    for (const [to, stale] of this.steps) {
      await (to === 'delete' ? new Trash(this.who, this.idx) : new Transition(this.who, this.idx, to, stale, this.idx)).run(m, r);
    }
  }
  toString = () => `walk(${this.who}, #${this.idx}, ${this.steps.map(([to, stale]) => `${to}${stale ? '/stale' : ''}`).join(' → ')})`;
}

class GetItem implements Cmd {
  constructor(readonly who: Who, readonly idx: number, readonly versions: boolean) {}
  check = (m: Readonly<Model>) => m.items.length > 0;
  async run(m: Model, r: Real): Promise<void> {
    const item = pick(m.items, this.idx);
    const what = `${this.toString()} on ${item.id} (${item.type}${item.purged ? ', purged' : ''})`;
    const res = await r.as[this.who].get(`/items/${item.id}`);
    const visible = !item.purged && canRead(this.who, item.type);
    if (!visible) expectOneOf(res, [[404, 'item_not_found']], what);
    else {
      expectStatus(res, 200, what);
      checkItem(m, res.body, item, this.who, what);
    }
    if (!this.versions) return;
    // GET /items/{id}/edges: both directions by default, only what the caller may see (docs "Edge types and edges").
    const listed = await r.as[this.who].get(`/items/${item.id}/edges`, { limit: 100 });
    if (!visible) expectOneOf(listed, [[404, 'item_not_found']], `${what}: edges`);
    else {
      expectStatus(listed, 200, `${what}: edges`);
      const seen = (e: MEdge) => edgeRead(this.who, e.type) && canRead(this.who, e.source.type) && canRead(this.who, e.target.type);
      const want = m.liveEdges().filter((e) => (e.source === item || e.target === item) && seen(e)).map((e) => e.id).sort();
      const got = (listed.body.edges as Array<{ id: string }>).map((e) => e.id).sort();
      if (!sameJson(got, want)) fail(`${what}: edges should be ${JSON.stringify(want)}`, listed);
    }
    // SPEC 2.2: the item's metadata, extensions as the caller may see them.
    const meta = await r.as[this.who].get(`/items/${item.id}/metadata`);
    if (!visible) expectOneOf(meta, [[404, 'item_not_found']], `${what}: metadata`);
    else {
      expectStatus(meta, 200, `${what}: metadata`);
      const want = { item_id: item.id, tags: item.tags, extensions: visibleExtensions(this.who, item.extensions) };
      if (!sameJson(meta.body, want)) fail(`${what}: metadata should be ${JSON.stringify(want)}`, meta);
    }
    const v = await r.as[this.who].get(`/items/${item.id}/versions`, { limit: 100 });
    if (!visible) return expectOneOf(v, [[404, 'item_not_found']], `${what}: versions`);
    expectStatus(v, 200, `${what}: versions`);
    // Every change is a revision, newest first (README "Optimistic concurrency").
    const got = (v.body.versions as Array<Record<string, any>>).map((x) => ({
      version: x.version,
      properties: x.item.properties,
      tags: x.item.tags,
      state: x.item.state,
      tier: x.item.tier,
      extensions: x.item.extensions,
    }));
    const want = item.history.map((s, i) => ({ version: i + 1, ...s, extensions: visibleExtensions(this.who, s.extensions) })).reverse();
    if (!sameJson(got, want)) throw new Error(`${what}: revisions differ\n  model:   ${JSON.stringify(want)}\n  service: ${JSON.stringify(got)}`);
  }
  toString = () => `get(${this.who}, #${this.idx}${this.versions ? ', versions' : ''})`;
}

// ------------------------------------------------------------------------------ bulk actions

type BulkFilter = { since?: string; until?: string; tags?: string[]; state?: State | 'all' };

function bulkFilter(m: Model, one: boolean, idx: number, tag: string, state: State | 'all' | undefined): BulkFilter | undefined {
  if (one) {
    if (!m.items.length) return undefined;
    // Creation timestamps are unique: a one-millisecond window selects exactly that item.
    const ts = pick(m.items, idx).timestamp;
    return { since: ts, until: plusMs(ts, 1), state: 'all' };
  }
  return { tags: [tag], ...(state ? { state } : {}) };
}

function expectIds(res: Response, got: unknown, want: MItem[], what: string, label: string): void {
  const g = [...((got as string[] | undefined) ?? [])].sort();
  const w = want.map((i) => i.id).sort();
  if (!sameJson(g, w)) fail(`${what}: ${label} should be ${JSON.stringify(w)}`, res);
}

class Purge implements Cmd {
  constructor(readonly who: Who, readonly one: boolean, readonly idx: number, readonly tag: string, readonly state: State | 'all' | undefined, readonly dryRun: boolean) {}
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    const filter = bulkFilter(m, this.one, this.idx, this.tag, this.state) ?? { tags: [this.tag] };
    const what = `${this.toString()} with ${JSON.stringify(filter)}`;
    const res = await r.as[this.who].post('/items/bulk_action', { action: 'purge', confirm: 'PURGE', filter, ...(this.dryRun ? { dry_run: true } : {}) });
    // SPEC 4.1 rule 1: purge is admin-only regardless of filter.
    if (this.who !== 'admin') return expectOneOf(res, [[403, 'forbidden']], what);
    const hit = m.items.filter((i) => matches(i, 'admin', filter));
    expectStatus(res, 200, what);
    const b = res.body;
    if (b.action !== 'purge' || b.matched !== hit.length || b.dry_run !== this.dryRun || b.errored !== 0 || b.succeeded !== (this.dryRun ? 0 : hit.length)) {
      fail(`${what}: expected matched=${hit.length}, succeeded=${this.dryRun ? 0 : hit.length}`, res);
    }
    expectIds(res, b.ids, hit, what, 'ids');
    if (!this.dryRun) m.purge(hit);
  }
  toString = () => `purge(${this.who}, ${this.one ? `#${this.idx}` : `tag ${this.tag}, state ${this.state}`}${this.dryRun ? ', dry run' : ''})`;
}

class BulkTransition implements Cmd {
  constructor(readonly who: Who, readonly tag: string, readonly state: State | 'all' | undefined, readonly to: State) {}
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    const filter = { tags: [this.tag], ...(this.state ? { state: this.state } : {}) };
    const what = this.toString();
    const res = await r.as[this.who].post('/items/bulk_action', { action: 'transition', to_state: this.to, filter });
    // SPEC 4.1 rule 2: a member's match set is narrowed to the types it may write.
    const hit = m.items.filter((i) => matches(i, this.who, filter) && canWrite(this.who, i.type));
    const ok = hit.filter((i) => mayMove(i, this.to));
    const refused = hit.filter((i) => !mayMove(i, this.to));
    expectStatus(res, 200, what);
    const b = res.body;
    if (b.matched !== hit.length || b.succeeded !== ok.length || b.errored !== refused.length) {
      fail(`${what}: expected matched=${hit.length}, succeeded=${ok.length}, errored=${refused.length}`, res);
    }
    expectIds(res, b.ids, ok, what, 'ids');
    expectIds(res, (b.errors ?? []).map((e: { id: string }) => e.id), refused, what, 'errors');
    if ((b.errors ?? []).some((e: { code: string }) => e.code !== 'invalid_transition')) fail(`${what}: every error should be invalid_transition`, res);
    // Every changed item gets version + 1, as a PATCH would; one left as it was is not rewritten.
    for (const i of ok) if (move(i, this.to)) bump(i);
  }
  toString = () => `bulkTransition(${this.who}, tag ${this.tag}, state ${this.state}, → ${this.to})`;
}

type UpdateAction =
  | { action: 'update_tags'; add_tags: string[]; remove_tags: string[] }
  | { action: 'update_tier'; tier: Tier }
  | { action: 'update_properties'; properties: { main?: string | null; body?: string | null; email?: string; priority?: number } }
  | { action: 'update_timestamp'; at: number };

interface UpdateFilter extends Pick<ListFilter, 'since' | 'until'> {
  type?: 'core.note' | 'core.task' | 'core.contact' | 'core.*';
  tags?: string[];
  state?: State | 'all';
  tier?: Tier | 'all';
  source?: Who;
  /** `filter.filter`: free text with GET /search's syntax, exact matches only (README "Bulk actions"). */
  text?: string;
  /** The n-th newest item, through a one-millisecond window on its timestamp and state `all` (as Purge's). */
  pick?: number;
}

/**
 * The update actions run directly (a match set under BULK_SYNC_MAX): each matched item the
 * action can change gets version + 1 and a revision; one it would leave as it was succeeds
 * unwritten; one the single write would refuse is that item's error (README "Bulk actions").
 */
class BulkUpdate implements Cmd {
  constructor(readonly who: Who, readonly act: UpdateAction, readonly f: UpdateFilter, readonly dryRun: boolean) {}
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    const f = { ...this.f };
    // A type the member may not read is left out of its filters, as in List.
    if (this.who === 'member' && f.type === 'core.contact') f.type = 'core.note';
    if (f.pick !== undefined && m.items.length) {
      const ts = pick(m.items, f.pick).timestamp;
      Object.assign(f, { since: ts, until: plusMs(ts, 1), state: 'all' });
    }
    const filter: Record<string, unknown> = {
      ...(f.type ? { type: f.type } : {}),
      ...(f.tags ? { tags: f.tags } : {}),
      ...(f.state ? { state: f.state } : {}),
      ...(f.tier ? { tier: f.tier } : {}),
      ...(f.source ? { source: r.source[f.source] } : {}),
      ...(f.text ? { filter: f.text } : {}),
      ...(f.since ? { since: f.since, until: f.until } : {}),
    };
    const a = this.act;
    const fields =
      a.action === 'update_timestamp'
        ? { timestamp: plusMs(stamp(a.at), 500) }
        : a.action === 'update_properties'
          ? { properties: this.rawPatch() }
          : a.action === 'update_tags'
            ? { add_tags: a.add_tags, remove_tags: a.remove_tags }
            : { tier: a.tier };
    const what = `${this.toString()} = ${JSON.stringify(filter)}`;
    const hit = m.items.filter((i) => matches(i, this.who, f) && (!f.text || hasWord(i, f.text)) && canWrite(this.who, i.type));
    const plans = hit.map((i) => ({ item: i, ...this.plan(i, fields) }));
    const res = await r.as[this.who].post('/items/bulk_action', { action: a.action, filter, ...(this.dryRun ? { dry_run: true } : {}), ...fields });
    expectStatus(res, 200, what);
    const b = res.body;
    const ok = plans.filter((p) => !p.error);
    const refused = plans.filter((p) => p.error);
    if (this.dryRun) {
      if (b.dry_run !== true || b.matched !== hit.length || b.succeeded !== 0 || b.errored !== 0) fail(`${what}: expected a dry run matching ${hit.length}`, res);
      return expectIds(res, b.ids, hit, what, 'ids');
    }
    if (b.action !== a.action || b.dry_run !== false || b.matched !== hit.length || b.succeeded !== ok.length || b.errored !== refused.length) {
      fail(`${what}: expected matched=${hit.length}, succeeded=${ok.length}, errored=${refused.length}`, res);
    }
    expectIds(res, b.ids, ok.map((p) => p.item), what, 'ids');
    expectIds(res, (b.errors ?? []).map((e: { id: string }) => e.id), refused.map((p) => p.item), what, 'errors');
    for (const e of (b.errors ?? []) as Array<{ id: string; code: string }>) {
      const want = refused.find((p) => p.item.id === e.id)!.error!;
      if (!want.includes(e.code)) fail(`${what}: the error of ${e.id} should be one of ${want}`, res);
    }
    for (const p of ok) {
      if (!p.changed) continue;
      p.apply();
      bump(p.item);
    }
  }
  /** The properties patch: `title` is required by core.task only, an extra property of a contact. */
  private rawPatch(): Props {
    const a = this.act as Extract<UpdateAction, { action: 'update_properties' }>;
    const out: Props = {};
    if (a.properties.main !== undefined) out.title = a.properties.main;
    if (a.properties.body !== undefined) out.body = a.properties.body;
    if (a.properties.email !== undefined) out.email = a.properties.email;
    if (a.properties.priority !== undefined) out.priority = a.properties.priority;
    return out;
  }
  private plan(i: MItem, fields: Record<string, unknown>): { changed: boolean; error?: string[]; apply: () => void } {
    const a = this.act;
    if (a.action === 'update_tags') {
      const tags = [...i.tags];
      for (const t of a.add_tags) if (!tags.includes(t)) tags.push(t);
      const next = tags.filter((t) => !a.remove_tags.includes(t));
      return { changed: !sameJson(next, i.tags), apply: () => (i.tags = next) };
    }
    if (a.action === 'update_tier') return { changed: i.tier !== a.tier, apply: () => (i.tier = a.tier) };
    if (a.action === 'update_timestamp') {
      const ts = fields.timestamp as string;
      return { changed: Date.parse(ts) !== Date.parse(i.timestamp), apply: () => (i.timestamp = ts) };
    }
    const next = mergeProps(i.properties, fields.properties as Props);
    // README: checked against each item's type schema; the code a single write answers (docs "Items") is accepted too.
    if (REQUIRES_MAIN[i.type] && next[MAIN_KEY[i.type]] === undefined) return { changed: false, error: ['missing_required_field', 'invalid_properties'], apply: () => undefined };
    // docs "Types": a contact's `email` has format `email`, a task's `priority` is 0 to 5; other properties are free on every core type.
    const badEmail = i.type === 'core.contact' && typeof next.email === 'string' && !next.email.includes('@');
    const badPriority = i.type === 'core.task' && typeof next.priority === 'number' && next.priority > 5;
    if (badEmail || badPriority) return { changed: false, error: ['invalid_properties'], apply: () => undefined };
    return { changed: !sameJson(next, i.properties), apply: () => (i.properties = next) };
  }
  toString = () => `bulkUpdate(${this.who}, ${JSON.stringify(this.act)}, filter ${JSON.stringify(this.f)}${this.dryRun ? ', dry run' : ''})`;
}

// ------------------------------------------------------------------------------ search

/**
 * GET /search for one of SEARCH_WORDS (or PREFIX_WORD): exactly the live items the caller may
 * read whose text or tags hold it (SPEC 4.3), composed with GET /items' filters.
 */
export class Search implements Cmd {
  constructor(
    readonly who: Who,
    readonly word: string,
    readonly state: State | 'all' | undefined,
    readonly tier: Tier | 'all' | undefined,
    readonly f: Pick<ListFilter, 'type' | 'tags' | 'source'> = {},
  ) {}
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    const what = this.toString();
    const f: ListFilter = { ...this.f, state: this.state, tier: this.tier };
    // A type the member may not read is left out of its filters, as in List.
    if (this.who === 'member' && f.type === 'core.contact') f.type = 'core.note';
    const query: Record<string, string | number> = { q: this.word, limit: 100 };
    if (f.state) query.state = f.state;
    if (f.tier) query.tier = f.tier;
    if (f.type) query.type = f.type;
    if (f.tags) query.tags = f.tags.join(',');
    if (f.source) query.source = r.source[f.source];
    const res = await r.as[this.who].get('/search', query);
    expectStatus(res, 200, what);
    const want = m.items.filter((i) => matches(i, this.who, f) && hasWord(i, this.word));
    const results = res.body.results as Array<Record<string, any>>;
    const gotIds = results.map((x) => x.item.id as string);
    if (!sameJson([...gotIds].sort(), want.map((i) => i.id).sort())) {
      const missing = want.filter((i) => !gotIds.includes(i.id)).map((i) => `${i.id} ${i.type} ${i.state} ${i.tier} [${i.tags}] ${JSON.stringify(i.properties)}`);
      const extra = results.filter((x) => !want.some((w) => w.id === x.item.id)).map((x) => `${x.item.id} ${x.item.type} ${x.item.state} [${x.item.tags}] ${JSON.stringify(x.item.properties)}`);
      throw new Error(`${what}: results differ from the model\n  missing: ${JSON.stringify(missing)}\n  extra: ${JSON.stringify(extra)}`);
    }
    for (const x of results) {
      const item = want.find((i) => i.id === x.item.id)!;
      checkItem(m, x.item, item, this.who, what);
      // SPEC 2.2 / 2.3: the entry's metadata is the item's, as the caller may see it.
      const meta = { item_id: item.id, tags: item.tags, extensions: visibleExtensions(this.who, item.extensions) };
      if (!sameJson(x.metadata, meta)) fail(`${what}: metadata should be ${JSON.stringify(meta)}`, res);
    }
  }
  toString = () => `search(${this.who}, ${JSON.stringify(this.word)}, state ${this.state}, tier ${this.tier}, ${JSON.stringify(this.f)})`;
}

// ------------------------------------------------------------------------------ edges

class AddEdge implements Cmd {
  constructor(readonly who: Who, readonly type: EdgeType, readonly si: number, readonly ti: number) {}
  check = (m: Readonly<Model>) => m.items.length > 0;
  async run(m: Model, r: Real): Promise<void> {
    const src = pick(m.items, this.si);
    const tgt = pick(m.items, this.ti);
    const what = `${this.toString()}: ${src.id} (${src.type}${src.purged ? ', purged' : ''}) → ${tgt.id} (${tgt.type}${tgt.purged ? ', purged' : ''})`;
    const res = await r.as[this.who].post('/edges', { type: this.type, source_id: src.id, target_id: tgt.id });
    const errors: Expected = [];
    const live = m.liveEdges();
    if (src.purged || tgt.purged || !canRead(this.who, src.type) || !canRead(this.who, tgt.type)) errors.push([404, 'item_not_found']);
    // Dual gate (SPEC 2.7, 7.3); an edge type the key may not even read may be answered as missing.
    if (!edgeRead(this.who, this.type)) errors.push([404, 'edge_type_not_found'], [403, 'edge_permission_denied']);
    else if (!edgeWrite(this.who, this.type)) errors.push([403, 'edge_permission_denied']);
    if (!canWrite(this.who, src.type)) errors.push([403, 'edge_permission_denied']);
    // SPEC 7.2: type constraint, cardinality, duplicate; docs: edge_cycle for acyclic types, self-loops included.
    if (this.type === 'm.one' && (src.type !== 'core.note' || tgt.type === 'core.contact')) errors.push([400, 'edge_constraint_violation']);
    if (live.some((e) => e.type === this.type && e.source === src && e.target === tgt)) errors.push([400, 'edge_constraint_violation']);
    if (this.type === 'm.one' && live.some((e) => e.type === 'm.one' && e.source === src)) errors.push([400, 'edge_constraint_violation']);
    if (this.type === 'm.dag' && m.reaches(tgt, src, 'm.dag')) errors.push([400, 'edge_cycle']);
    if (errors.length) return expectOneOf(res, errors, what);
    expectStatus(res, 201, what);
    const b = res.body;
    if (b.type !== this.type || b.source_id !== src.id || b.target_id !== tgt.id || typeof b.id !== 'string') fail(`${what}: edge body`, res);
    m.edges.push({ id: b.id, type: this.type, source: src, target: tgt, gone: false });
  }
  toString = () => `addEdge(${this.who}, ${this.type}, #${this.si} → #${this.ti})`;
}

class RemoveEdge implements Cmd {
  constructor(readonly who: Who, readonly idx: number) {}
  check = (m: Readonly<Model>) => m.edges.length > 0;
  async run(m: Model, r: Real): Promise<void> {
    const e = pick(m.edges, this.idx);
    const what = `${this.toString()}: ${e.type} ${e.source.type} → ${e.target.type}${e.gone ? ' (gone)' : ''}`;
    const res = await r.as[this.who].delete(`/edges/${e.id}`);
    // docs: seeing an edge needs read on its edge type and on both items' types; removing it, the dual gate.
    const visible = !e.gone && edgeRead(this.who, e.type) && canRead(this.who, e.source.type) && canRead(this.who, e.target.type);
    if (!visible) return expectOneOf(res, [[404, 'edge_not_found']], what);
    if (!edgeWrite(this.who, e.type) || !canWrite(this.who, e.source.type)) return expectOneOf(res, [[403, 'edge_permission_denied']], what);
    expectStatus(res, 200, what);
    if (res.body.id !== e.id) fail(`${what}: the deleted edge`, res);
    e.gone = true;
  }
  toString = () => `removeEdge(${this.who}, edge #${this.idx})`;
}

// ------------------------------------------------------------------------------ listing

/** Pages through GET /items and compares the whole result with the model (ids, each item, order, no overlap). */
export async function compareListing(m: Model, r: Real, who: Who, f: ListFilter, limit: number, what: string): Promise<void> {
  const query: Record<string, string | number> = { limit };
  if (f.type) query.type = f.type;
  if (f.tags) query.tags = f.tags.join(',');
  if (f.state) query.state = f.state;
  if (f.tier) query.tier = f.tier;
  if (f.since) query.since = f.since;
  if (f.until) query.until = f.until;
  if (f.source) query.source = r.source[f.source];
  const got: Array<Record<string, any>> = [];
  let cursor: string | undefined;
  for (let page = 0; ; page++) {
    if (page > 500) throw new Error(`${what}: the listing does not end`);
    const res = await r.as[who].get('/items', cursor ? { ...query, cursor } : query);
    expectStatus(res, 200, `${what}: page ${page}`);
    if (res.body.items.length > limit) fail(`${what}: a page longer than limit ${limit}`, res);
    got.push(...res.body.items);
    if (res.body.next_cursor === null) break;
    cursor = res.body.next_cursor;
  }
  const want = m.items.filter((i) => matches(i, who, f));
  const gotIds = got.map((i) => i.id as string);
  if (new Set(gotIds).size !== gotIds.length) throw new Error(`${what}: pages overlap: ${JSON.stringify(gotIds)}`);
  if (!sameJson([...gotIds].sort(), want.map((i) => i.id).sort())) {
    const missing = want.filter((i) => !gotIds.includes(i.id)).map((i) => `${i.id} ${i.type} ${i.state} [${i.tags}] ${i.owner}`);
    const extra = got.filter((i) => !want.some((w) => w.id === i.id)).map((i) => `${i.id} ${i.type} ${i.state} [${i.tags}]`);
    throw new Error(`${what}: listing differs from the model\n  missing: ${JSON.stringify(missing)}\n  extra: ${JSON.stringify(extra)}`);
  }
  // Newest first by created_at, then id (docs "Listing").
  for (let n = 1; n < got.length; n++) {
    const a = got[n - 1];
    const b = got[n];
    const ta = Date.parse(a.created_at);
    const tb = Date.parse(b.created_at);
    if (ta < tb || (ta === tb && a.id < b.id)) throw new Error(`${what}: not newest first at ${n}: ${a.id} ${a.created_at}, ${b.id} ${b.created_at}`);
  }
  for (const body of got) checkItem(m, body, want.find((i) => i.id === body.id)!, who, what);
}

class List implements Cmd {
  constructor(readonly who: Who, readonly f: Omit<ListFilter, 'since' | 'until'>, readonly since: number | undefined, readonly until: number | undefined, readonly limit: number) {}
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    const f: ListFilter = { ...this.f };
    // A type the member may not read is left out of its filters: how it is answered is not fixed.
    if (this.who === 'member' && f.type === 'core.contact') f.type = 'core.note';
    if (this.since !== undefined && m.items.length) f.since = pick(m.items, this.since).timestamp;
    if (this.until !== undefined && m.items.length) f.until = pick(m.items, this.until).timestamp;
    await compareListing(m, r, this.who, f, this.limit, `${this.toString()} = ${JSON.stringify(f)}`);
  }
  toString = () => `list(${this.who}, ${JSON.stringify(this.f)}, since=#${this.since}, until=#${this.until}, limit=${this.limit})`;
}

// ------------------------------------------------------------------------------ arbitraries

const who = fc.constantFrom<Who>('admin', 'admin', 'member');
const idx = fc.oneof({ arbitrary: fc.nat(2), weight: 3 }, { arbitrary: fc.nat(), weight: 1 });
const tags = fc.option(fc.shuffledSubarray(TAG_POOL), { nil: undefined });
const text = fc.constantFrom('a', 'b', 'c', 'quite a long title', 'kumquat', 'bilberry pie', 'tamarind, kumquat');
const state = fc.constantFrom<State>(...STATES);
const stateFilter = fc.option(fc.constantFrom<State | 'all'>(...STATES, 'all'), { nil: undefined });
const tag = fc.constantFrom(...TAG_POOL);
const tier = fc.option(fc.constantFrom<Tier>(...TIERS), { nil: undefined });
const tierFilter = fc.option(fc.constantFrom<Tier | 'all'>(...TIERS, 'all'), { nil: undefined });
/** Two keys, so that a merge inside a namespace (extensions merge shallowly: a namespace is replaced whole) shows. */
const extValue = fc.tuple(fc.constantFrom('v', 'w'), fc.nat(2)).map(([k, v]) => ({ [k]: v }));
/** Tag lists as sent may repeat a tag: it is kept once, where it first appears (docs "Items"). */
const tagList = fc.array(tag, { maxLength: 3 });
/** Namespaces to write: `acme.mine` (the member's to write), `acme.pub` (it reads only) and `other.secret` (hidden from it). */
const extCreate = fc.oneof(
  { arbitrary: fc.constant(undefined), weight: 2 },
  fc.oneof(
    extValue.map((v): Extensions => ({ 'acme.mine': v })),
    fc.subarray(NAMESPACES, { minLength: 1 }).chain((nss) => fc.tuple(...nss.map(() => extValue)).map((vs) => Object.fromEntries(nss.map((ns, n) => [ns, vs[n]])) as Extensions)),
  ),
);
const extPatch = fc.option(fc.dictionary(fc.constantFrom(...NAMESPACES, 'acme.mine', 'acme.mine', 'acme.mine'), fc.option(extValue, { nil: null }), { minKeys: 1, maxKeys: 2 }), {
  nil: undefined,
  freq: 2,
});

const create = fc
  .tuple(
    who,
    fc.constantFrom<ItemType>(...ITEM_TYPES),
    text,
    fc.option(text, { nil: undefined }),
    tags,
    // Half the creations without a natural key, so that runs hold enough items to search and act on.
    fc.option(fc.constantFrom('1', '2', 'shared'), { nil: undefined, freq: 1 }),
    fc.option(fc.constantFrom<State>('active', 'archived', 'active', 'archived', 'trashed', 'revoked'), { nil: undefined }),
    fc.option(idx, { nil: undefined, freq: 3 }),
    tier,
    extCreate,
  )
  // Natural keys mostly stay within one type; `shared` is re-posted under other types too.
  .map(
    ([w, type, main, body, t, key, st, edgeTo, ti, ext]) =>
      new CreateItem(w, type, main, body, t, key && key !== 'shared' ? `${type}-${key}` : key, st, edgeTo, ti, ext),
  );

const search = fc
  .tuple(
    who,
    fc.constantFrom(...SEARCH_WORDS, PREFIX_WORD),
    stateFilter,
    tierFilter,
    fc.record(
      {
        type: fc.constantFrom<ListFilter['type']>('core.note', 'core.task', 'core.contact', 'core.*'),
        tags: fc.shuffledSubarray(TAG_POOL, { minLength: 1, maxLength: 1 }),
        source: fc.constantFrom<Who>('admin', 'member'),
      },
      { requiredKeys: [] },
    ),
  )
  .map((a) => new Search(...a));

const bulkUpdate = fc
  .tuple(
    who,
    fc.oneof(
      fc
        .tuple(tagList, fc.shuffledSubarray(TAG_POOL, { maxLength: 2 }))
        .map(([add, remove]): UpdateAction => ({ action: 'update_tags', add_tags: add.length || remove.length ? add : ['red'], remove_tags: remove })),
      fc.constantFrom<Tier>(...TIERS).map((t): UpdateAction => ({ action: 'update_tier', tier: t })),
      fc
        .record(
          {
            main: fc.option(text, { nil: null }),
            body: fc.option(text, { nil: null }),
            email: fc.constantFrom('ann@example.com', 'not an email'),
            priority: fc.constantFrom(3, 9),
          },
          { requiredKeys: [] },
        )
        .filter((p) => Object.keys(p).length > 0)
        .map((p): UpdateAction => ({ action: 'update_properties', properties: p })),
      fc.nat(12).map((at): UpdateAction => ({ action: 'update_timestamp', at })),
    ),
    // At most two clauses, so that the match set is seldom empty.
    fc
      .tuple(
        fc.record({
          type: fc.constantFrom<UpdateFilter['type']>('core.note', 'core.task', 'core.contact', 'core.*'),
          tags: fc.shuffledSubarray(TAG_POOL, { minLength: 1, maxLength: 1 }),
          state: fc.constantFrom<State | 'all'>(...STATES, 'all'),
          tier: fc.constantFrom<Tier | 'all'>(...TIERS, 'all'),
          source: fc.constantFrom<Who>('admin', 'member'),
          text: fc.constantFrom(...SEARCH_WORDS, PREFIX_WORD, TYPO_WORD),
          pick: idx,
        }),
        fc.oneof(
          fc.subarray<keyof UpdateFilter>(['type', 'tags', 'state', 'tier', 'source', 'text'], { maxLength: 2 }),
          fc.constant<Array<keyof UpdateFilter>>(['pick']),
        ),
      )
      .map(([all, keys]) => Object.fromEntries(keys.map((k) => [k, all[k as keyof typeof all]])) as UpdateFilter),
    fc.constantFrom(false, false, false, true),
  )
  .map((a) => new BulkUpdate(...a));

const addEdge = fc.tuple(who, fc.constantFrom<EdgeType>(...EDGE_TYPES), idx, idx).map((a) => new AddEdge(...a));

/** Creations are drawn six times as often as the rest: every other command needs items. */
export const COMMANDS: Array<fc.Arbitrary<Cmd>> = [
  create,
  create,
  create,
  create,
  create,
  create,
  fc
    .tuple(
      who,
      idx,
      fc.constantFrom<VersionMode>('fresh', 'fresh', 'stale', 'future'),
      fc.nat(),
      fc.option(fc.record({ main: fc.option(text, { nil: null }), body: fc.option(text, { nil: null }) }, { requiredKeys: [] }), { nil: undefined }),
      tags,
      tier,
      extPatch,
    )
    .map((a) => new PatchItem(...a)),
  fc
    .tuple(
      who,
      idx,
      fc.shuffledSubarray(TAG_POOL),
      fc.shuffledSubarray(TAG_POOL),
      fc.option(fc.record({ main: fc.option(text, { nil: null }), body: fc.option(text, { nil: null }) }, { requiredKeys: [] }), { nil: undefined, freq: 3 }),
    )
    .map((a) => new TwoWriters(...a)),
  fc
    .tuple(who, idx, tagList, fc.shuffledSubarray(TAG_POOL, { maxLength: 2 }), extPatch)
    .map((a) => new MetadataTags(...a)),
  fc.tuple(who, idx, state, fc.boolean(), fc.nat()).map((a) => new Transition(...a)),
  fc.tuple(who, idx).map((a) => new Trash(...a)),
  fc
    .tuple(
      fc.constantFrom<Who>('admin', 'admin', 'member'),
      fc.nat(1),
      fc.array(fc.tuple(fc.constantFrom<State | 'delete'>(...STATES, 'delete'), fc.boolean()), { minLength: 2, maxLength: 4 }),
    )
    .map((a) => new Walk(...a)),
  fc.tuple(who, idx, fc.boolean()).map((a) => new GetItem(...a)),
  fc
    .tuple(fc.constantFrom<Who>('admin', 'admin', 'admin', 'member'), fc.boolean(), idx, tag, stateFilter, fc.boolean())
    .map((a) => new Purge(...a)),
  fc.tuple(who, tag, stateFilter, state).map((a) => new BulkTransition(...a)),
  bulkUpdate,
  bulkUpdate,
  search,
  search,
  addEdge,
  addEdge,
  fc.tuple(who, idx).map((a) => new RemoveEdge(...a)),
  fc
    .tuple(
      who,
      fc.record(
        {
          type: fc.constantFrom<ListFilter['type']>('core.note', 'core.task', 'core.contact', 'core.*'),
          tags: fc.shuffledSubarray(TAG_POOL, { minLength: 1, maxLength: 2 }),
          state: fc.constantFrom<State | 'all'>(...STATES, 'all'),
          tier: fc.constantFrom<Tier | 'all'>(...TIERS, 'all'),
          source: fc.constantFrom<Who>('admin', 'member'),
        },
        { requiredKeys: [] },
      ),
      fc.option(idx, { nil: undefined, freq: 4 }),
      fc.option(idx, { nil: undefined, freq: 4 }),
      fc.integer({ min: 1, max: 7 }),
    )
    .map((a) => new List(...a)),
];
