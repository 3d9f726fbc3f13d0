/**
 * Owns items: create and natural-key upsert, bulk writes, reads and listing (in the order
 * listing-order.ts gives a page, through the statements of item-filter.ts), PATCH with
 * optimistic concurrency and conflict details, the lifecycle, metadata (tags and extensions)
 * and the revision history. Every statement is scoped by tenant_id; every rule about who may
 * see or change what goes through auth/permissions.ts.
 */
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { validate as classValidate } from 'class-validator';
import { DataSource, EntityManager } from 'typeorm';
import { canEdgeType, canExtension, canMetadata } from '../auth/permissions';
import type { Principal } from '../auth/principal';
import { ApiError } from '../common/api-error';
import { AppConfig, sizeBytes } from '../config/app-config';
import { WRITE_INSTANT } from '../common/db-clock';
import { BlobsService } from '../blobs/blobs.service';
import type { FetchedOutgoingEdge } from '../edges/edge-rules';
import { EdgesService } from '../edges/edges.service';
import { EdgeTypesService } from '../edges/edge-types.service';
import { BATCH_PATTERN_BUDGET_MS, withPatternBudget } from '../types/pattern-check';
import { newId } from '../common/ids';
import { inputIssues } from '../common/input-policy';
import { Bounded, byteBoundedPage, cutShort, pageWith, ScannedRow, scanEndOf } from '../common/pagination';
import { isDottedName } from '../common/type-pattern';
import { plainToDto, validationError, validationIssues } from '../common/validation';
import { TypeCatalogService } from '../types/type-catalog';
import { ResolvedType, TypesService } from '../types/types.service';
import { conflictingFields, mergeTags, onlyAutoMerged, touchedFields } from './conflict';
import {
  blobReferences, changeTags, ExtensionsPatch, mergeExtensions, mergeProperties, nextValues, propertiesError, tooLarge, tooManyTags, typeNotPermitted,
} from './item-changes';
import { Item, ITEM_BYTES, ITEM_COLUMNS, ITEM_COLUMNS_I, ITEM_WRITE_LOCK, ItemRow, toItem } from './item.model';
import { ItemChanges, ItemWriter } from './item-writer';
import {
  assertTypePattern, EdgeClause, edgeMatchesSql, FEW_EDGE_MATCHES, FEW_WINDOW_ITEMS, ItemFilter, itemWhere, parseEdgeClauses, parseTags, propertyScanSql,
  selectsNothing, Window, windowedItemsSql, windowItemsSql, windowsOf,
} from './item-filter';
import {
  afterSql, cursorAfter, isDigest, ListingOrder, listingOrder, ListingPosition, longValuePosition, orderBy, positionOf, positionValueSql,
} from './listing-order';
import { parsePropertyClauses } from './property-filter';
import { restoringPatch } from './restore';
import {
  BulkItemResult, BulkItemsDto, BulkItemsResponse, CreateItemDto, ItemList, ItemMetadata, ItemVersion, ItemVersionList, ListItemsQuery,
  MetadataPatchDto, PatchItemDto, RestoreItemDto, VersionsQuery,
} from './items.dto';
import { assertInitialState, assertTransition } from './lifecycle';

const notFound = () => ApiError.notFound('item_not_found', 'No such item');
const noSuchVersion = (version: number) => ApiError.notFound('not_found', `The item has no version ${version}`);

interface VersionRow {
  version: number;
  snapshot: ItemRow;
  changed_by: string;
  created_at: Date;
}

const toVersion = (p: Principal, r: VersionRow): ItemVersion => ({
  version: r.version,
  item: toItem(p, r.snapshot),
  changed_by: r.changed_by,
  created_at: r.created_at.toISOString(),
});

/** Natural keys in code-unit order, elements without one after all that have one. */
const compareNaturalKeys = (a: string | undefined, b: string | undefined): number =>
  a === b ? 0 : a === undefined ? 1 : b === undefined ? -1 : a < b ? -1 : 1;

/**
 * An edge error about the item the request was creating (its type not allowed as a source, one
 * outgoing edge too many) would name it by an id the rollback leaves pointing at nothing: it
 * names it as the new item instead, `null` in its details.
 */
function asAboutNewItem(err: unknown, id: string): unknown {
  if (!(err instanceof ApiError) || !err.details) return err;
  const details = Object.fromEntries(Object.entries(err.details).map(([key, value]) => [key, value === id ? null : value]));
  return new ApiError(err.status, err.code, err.message.split(id).join('the new item'), details);
}

/** How often a natural key's insert is tried while concurrent writers keep creating and purging its item. */
const NATURAL_KEY_ATTEMPTS = 5;

@Injectable()
export class ItemsService {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly types: TypesService,
    private readonly typeCatalog: TypeCatalogService,
    private readonly edges: EdgesService,
    private readonly edgeTypes: EdgeTypesService,
    private readonly blobs: BlobsService,
    private readonly writer: ItemWriter,
    config: AppConfig,
  ) {
    this.maxItemBytes = sizeBytes(config.JSON_BODY_LIMIT)!;
  }

  private readonly maxItemBytes: number;

  /** An item's change through the writer, within the size rule (`tooLarge`). */
  private async change(m: EntityManager, p: Principal, current: ItemRow, changes: ItemChanges): Promise<ItemRow> {
    const sizeError = tooLarge(current, changes, this.maxItemBytes);
    if (sizeError) throw sizeError;
    return this.writer.update(m, p, current, changes);
  }

  // ---------------------------------------------------------------- writes

  async create(p: Principal, dto: CreateItemDto): Promise<{ item: Item; created: boolean }> {
    return this.db.transaction(async (m) => {
      const { row, created } = await this.write(m, p, dto, 'upsert');
      return { item: await this.present(p, row, m), created };
    });
  }

  /**
   * A write and the item it answers with, in one transaction: should reading the answer fail
   * (the database went away), the write is rolled back with it, so a 5xx never hides a
   * committed change that a retry would make again.
   */
  private writeAndPresent(p: Principal, work: (m: EntityManager) => Promise<ItemRow>): Promise<Item> {
    return this.db.transaction(async (m) => this.present(p, await work(m), m));
  }

  /**
   * Locks are taken in one order across requests, or two that sync the same keys in different
   * orders would each hold a key the other waits for, and deadlock: first the items the natural
   * keys already name, in id order (as bulk actions lock theirs); then the elements are written
   * in the order of their natural keys (those without one last), which orders the inserts of
   * new keys. Each result goes back to its element's index.
   */
  bulk(p: Principal, dto: BulkItemsDto): Promise<BulkItemsResponse> {
    // Its elements are written in one transaction: their pattern checks share one budget.
    return withPatternBudget(BATCH_PATTERN_BUDGET_MS, () => this.bulkWithin(p, dto));
  }

  private async bulkWithin(p: Principal, dto: BulkItemsDto): Promise<BulkItemsResponse> {
    const results: BulkItemResult[] = [];
    // Every element is validated before any lock is taken: only valid natural keys are locked.
    const valid: Array<[number, CreateItemDto]> = [];
    for (const [index, raw] of dto.items.entries()) {
      try {
        valid.push([index, await this.parseItemBody(raw)]);
      } catch (err) {
        if (!(err instanceof ApiError)) throw err;
        results.push({ index, status: 'error', error: err.toEnvelope().error });
      }
    }
    const order = valid.sort(([, a], [, b]) => compareNaturalKeys(a.source_id, b.source_id));
    const keys = [...new Set(order.map(([, body]) => body.source_id).filter((k) => k !== undefined))];
    await this.db.transaction(async (m) => {
      if (keys.length > 1) {
        await m.query(`SELECT 1 FROM items WHERE tenant_id = $1 AND source = $2 AND source_id = ANY($3::text[]) ORDER BY id${ITEM_WRITE_LOCK}`, [
          p.tenantId,
          p.source,
          keys,
        ]);
      }
      for (const [index, body] of order) {
        await m.query('SAVEPOINT bulk_item');
        try {
          const { row, created } = await this.write(m, p, body, dto.mode);
          await m.query('RELEASE SAVEPOINT bulk_item');
          results.push({ index, status: created ? 'created' : 'updated', id: row.id });
        } catch (err) {
          if (!(err instanceof ApiError)) throw err;
          await m.query('ROLLBACK TO SAVEPOINT bulk_item');
          results.push({ index, status: 'error', error: err.toEnvelope().error });
        }
      }
    });
    return { results: results.sort((a, b) => a.index - b.index) };
  }

  /**
   * Validates one element of a bulk request as POST /items would validate its body, the input
   * policy included (the route leaves it to each element: @PerElementBody).
   */
  private async parseItemBody(raw: unknown): Promise<CreateItemDto> {
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
      throw validationError([{ field: '(item)', message: 'must be an object' }]);
    }
    const issues = inputIssues(raw);
    if (issues.length) throw validationError(issues);
    const dto = plainToDto(CreateItemDto, raw);
    const errors = await classValidate(dto, { whitelist: true, forbidNonWhitelisted: true });
    if (errors.length) throw validationError(validationIssues(errors));
    return dto;
  }

  /** Create, or update through the natural key (source, source_id). */
  private async write(m: EntityManager, p: Principal, dto: CreateItemDto, mode: 'create_only' | 'upsert'): Promise<{ row: ItemRow; created: boolean }> {
    const type = await this.writableType(m, p, dto.type);
    this.assertMetadataWrite(p, dto.tags, dto.extensions);
    if (dto.source_id !== undefined) {
      const existing = await this.lockByNaturalKey(m, p, dto.source_id);
      if (existing) return { row: await this.upsertExisting(m, p, existing, dto, type, mode), created: false };
    }
    const properties = dto.properties ?? {};
    await this.validateProperties(type, properties);
    await this.assertBlobsExist(p, properties, m);
    const state = dto.state ?? 'active';
    assertInitialState(state);
    const insert = (): Promise<ItemRow[]> =>
      m.query(
        `INSERT INTO items (tenant_id, id, type, properties, state, version, schema_version, source, source_id, "timestamp", tier,
                            device, capture_latitude, capture_longitude, tags, extensions, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, 1, $6, $7, $8, COALESCE($9::timestamptz, ${WRITE_INSTANT}), $10, $11, $12, $13, $14, $15, ${WRITE_INSTANT}, ${WRITE_INSTANT})
         ON CONFLICT (tenant_id, source, source_id) WHERE source_id IS NOT NULL DO NOTHING
         RETURNING ${ITEM_COLUMNS}`,
        [
          p.tenantId, newId(), type.name, properties, state, type.version, p.source, dto.source_id ?? null, dto.timestamp ?? null,
          dto.tier ?? p.defaultTier, dto.device ?? null, dto.capture_latitude ?? null, dto.capture_longitude ?? null,
          dto.tags ?? [], mergeExtensions({}, dto.extensions),
        ],
      );
    let rows = await insert();
    // Lost a race for the natural key: the other writer committed first, so update its item; if
    // that item was purged meanwhile, the key is free again and the insert is tried anew.
    for (let attempt = 1; rows.length === 0; attempt++) {
      const existing = await this.lockByNaturalKey(m, p, dto.source_id!);
      if (existing) return { row: await this.upsertExisting(m, p, existing, dto, type, mode), created: false };
      if (attempt === NATURAL_KEY_ATTEMPTS) throw ApiError.conflict('conflict', 'The natural key kept changing hands under concurrent writes; send the request again');
      rows = await insert();
    }
    if (dto.edges) await this.edges.createMany(m, p, rows[0], dto.edges).catch((err: unknown) => Promise.reject(asAboutNewItem(err, rows[0].id)));
    await this.writer.created(m, p, rows[0], dto.edges !== undefined);
    return { row: rows[0], created: true };
  }

  private async upsertExisting(
    m: EntityManager, p: Principal, existing: ItemRow, dto: CreateItemDto, type: ResolvedType, mode: 'create_only' | 'upsert',
  ): Promise<ItemRow> {
    // A source can be shared by credentials that read different types (an OAuth client's grants):
    // an item the caller may not read is not named (SPEC 7 rule 4), only the key's being taken.
    const visible = existing.type === type.name || (await this.typeCatalog.can(p, existing.type, 'read'));
    if (mode === 'create_only') {
      throw ApiError.conflict('duplicate_source', `An item with source_id "${dto.source_id}" already exists for this source`, {
        ...(visible ? { id: existing.id } : {}),
        source: existing.source,
        source_id: existing.source_id,
      });
    }
    // SPEC 7.5: a re-post of a natural key updates, never 409; an item's type cannot change, so
    // a re-post under another type is invalid input.
    if (existing.type !== type.name) {
      const message = visible
        ? `must be ${existing.type}: the natural key (source, source_id) belongs to item ${existing.id} of that type, and an item's type cannot change`
        : 'must be the type of the item the natural key (source, source_id) already belongs to, which this credential cannot read; an item\'s type cannot change';
      throw validationError([{ field: 'type', message }]);
    }
    if (dto.properties !== undefined) {
      await this.validateProperties(type, dto.properties);
      await this.assertBlobsExist(p, dto.properties, m);
    }
    if (dto.state !== undefined) assertTransition(existing, dto.state);
    // Edges of an upsert are additive: ones that already exist are kept as they are.
    if (dto.edges) await this.edges.createMany(m, p, existing, dto.edges);
    return this.change(m, p, existing, nextValues(existing, dto, { properties: dto.properties ?? existing.properties, schema_version: type.version }));
  }

  async patch(p: Principal, id: string, dto: PatchItemDto): Promise<Item> {
    return this.writeAndPresent(p, async (m) => this.patchLocked(m, p, await this.lockVisible(m, p, id), dto));
  }

  /**
   * POST /items/{id}/versions/{version}/restore: the PATCH, based on `dto.version`, that takes the
   * item back to what revision `version` held (restore.ts says what it covers).
   */
  async restore(p: Principal, id: string, version: number, dto: RestoreItemDto): Promise<Item> {
    return this.writeAndPresent(p, async (m) => {
      const current = await this.lockVisible(m, p, id);
      const revision = await this.snapshot(m, p.tenantId, id, version);
      if (!revision) throw noSuchVersion(version);
      const patch = restoringPatch(p, current, revision);
      // The revision's properties as they were: the PATCH's merge would drop a top-level null it holds.
      return this.patchLocked(m, p, current, { version: dto.version, ...patch }, revision.properties);
    });
  }

  /**
   * A PATCH of `current`, locked in this transaction by lockVisible. `exactProperties`, when the
   * PATCH sends properties, are the item's next properties as they are, in place of the merge.
   */
  private async patchLocked(m: EntityManager, p: Principal, current: ItemRow, dto: PatchItemDto, exactProperties?: Record<string, unknown>): Promise<ItemRow> {
    if (!(await this.typeCatalog.can(p, current.type, 'write'))) throw typeNotPermitted(current.type);
    const { version, ...changes } = dto;
    const touched = touchedFields(changes);
    this.assertMetadataWrite(p, changes.tags, changes.extensions);
    let tags = changes.tags;
    if (version !== current.version) {
      const ancestor = version < current.version ? await this.snapshot(m, p.tenantId, current.id, version) : undefined;
      // A stale version is a conflict (SPEC 9) unless every field it touches merges by itself; an empty change touches none to merge.
      if (!ancestor || touched.length === 0 || !onlyAutoMerged(touched)) {
        const type = await this.types.forWrite(p.tenantId, current.type, m);
        throw ApiError.conflict('version_conflict', `The item is at version ${current.version}, not ${version}`, {
          current: await this.present(p, current, m),
          ancestor: ancestor ? toItem(p, ancestor) : null,
          conflicting_fields: ancestor ? conflictingFields(touched, ancestor, current) : touched,
          merge_policy: type?.mergePolicy ?? {},
        });
      }
      if (tags !== undefined) {
        // The merge keeps tags added meanwhile, which can take the item past the cap the request alone kept to.
        tags = mergeTags(ancestor.tags, tags, current.tags);
        const tagsError = tooManyTags(current.tags, tags, 'tags');
        if (tagsError) throw tagsError;
      }
    }
    if (changes.state !== undefined) assertTransition(current, changes.state);
    const properties = (changes.properties && exactProperties) ?? mergeProperties(current.properties, changes.properties);
    let schemaVersion = current.schema_version;
    if (changes.properties !== undefined) {
      const type = await this.types.forWrite(p.tenantId, current.type, m);
      if (!type) throw ApiError.badRequest('invalid_type', `Type ${current.type} no longer exists`);
      await this.validateProperties(type, properties);
      await this.assertBlobsExist(p, changes.properties, m);
      schemaVersion = type.version;
    }
    return this.change(m, p, current, nextValues(current, { ...changes, tags }, { properties, schema_version: schemaVersion }));
  }

  /** DELETE /items/{id}: moves the item to trash (idempotent). */
  async trash(p: Principal, id: string): Promise<Item> {
    return this.writeAndPresent(p, async (m) => {
      const current = await this.lockVisible(m, p, id);
      if (!(await this.typeCatalog.can(p, current.type, 'write'))) throw typeNotPermitted(current.type);
      assertTransition(current, 'trashed');
      return this.writer.update(m, p, current, { state: 'trashed' });
    });
  }

  async patchMetadata(p: Principal, id: string, dto: MetadataPatchDto): Promise<ItemMetadata> {
    const row = await this.db.transaction(async (m) => {
      const current = await this.lockVisible(m, p, id);
      // Tags and extensions are part of the item: changing them needs write on its type, as a
      // PATCH does, whatever the credential (and for tags, metadata:write; for an extension, its namespace).
      if (!(await this.typeCatalog.can(p, current.type, 'write'))) throw typeNotPermitted(current.type);
      const touchesTags = dto.tags !== undefined || dto.add_tags !== undefined || dto.remove_tags !== undefined;
      this.assertMetadataWrite(p, touchesTags ? [] : undefined, dto.extensions);
      const tags = changeTags(dto.tags ?? current.tags, dto.add_tags, dto.remove_tags);
      const tagsError = tooManyTags(current.tags, tags);
      if (tagsError) throw tagsError;
      return this.change(m, p, current, { tags, extensions: mergeExtensions(current.extensions, dto.extensions) });
    });
    return this.metadataOf(p, row);
  }

  // ---------------------------------------------------------------- reads

  async get(p: Principal, id: string): Promise<Item> {
    return this.present(p, await this.findVisible(this.db.manager, p, id));
  }

  async metadata(p: Principal, id: string): Promise<ItemMetadata> {
    return this.metadataOf(p, await this.findVisible(this.db.manager, p, id));
  }

  /** As the item shows them to the caller: without tags for a token that may not read them (as search's metadata). */
  private metadataOf(p: Principal, row: ItemRow): ItemMetadata {
    const item = toItem(p, row);
    return { item_id: row.id, ...(item.tags !== undefined ? { tags: item.tags } : {}), extensions: item.extensions };
  }

  /** The item filter of GET /items (also used by search and bulk actions). */
  async filterFor(p: Principal, q: Omit<ListItemsQuery, 'limit' | 'cursor' | 'sort'>, access: 'read' | 'write' = 'read'): Promise<ItemFilter> {
    assertTypePattern(q.type);
    const edges = parseEdgeClauses('edge', q.edge);
    const backrefs = parseEdgeClauses('backref', q.backref);
    await this.narrowEdgeClauses(p, [...edges, ...backrefs]);
    await this.markFewMatches(p, edges, backrefs);
    const tags = parseTags(q.tags);
    // Which items carry a tag says what their tags are: filtering by tags reads them.
    if (tags?.length && !canMetadata(p, 'read')) throw ApiError.forbidden('Filtering by tags needs the metadata:read scope');
    const permittedTypes = await this.typeCatalog.permittedTypeNames(p, access);
    return {
      types: q.type === undefined || q.type === '*' ? undefined : (await this.typeCatalog.catalog(p.tenantId)).matching(q.type),
      state: q.state,
      tier: q.tier,
      tags,
      // A natural key is the source's: source_id alone looks it up among the caller's own items.
      source: q.source ?? (q.source_id === undefined ? undefined : p.source),
      sourceId: q.source_id,
      since: q.since,
      until: q.until,
      updatedSince: q.updated_since,
      updatedUntil: q.updated_until,
      edges,
      backrefs,
      properties: parsePropertyClauses('property', q.property),
      permittedTypes,
      readableTypes: edges.length || backrefs.length ? (access === 'read' ? permittedTypes : await this.typeCatalog.permittedTypeNames(p, 'read')) : undefined,
    };
  }

  async list(p: Principal, q: ListItemsQuery): Promise<ItemList> {
    const order = listingOrder(q.sort);
    const filter = await this.filterFor(p, q);
    const limit = q.limit ?? 50;
    const position = await this.listingPosition(p, filter, order, q.cursor);
    if (selectsNothing(filter)) return { items: [], next_cursor: null };
    const params: unknown[] = [];
    const after = position && ((alias: string) => afterSql(order, alias, position, (v) => `$${params.push(v)}`));
    const columns = `${ITEM_COLUMNS_I}, ${positionValueSql(order, 'i')} AS position_value`;
    const window = await this.fewItemsWindow(p, filter, order);
    let statement: string;
    if (window) {
      statement = windowedItemsSql(p.tenantId, filter, window, order, params, columns, after);
    } else if (filter.properties?.length && !order.path) {
      // A property order reads every selected item anyway (no index): the plain statement tests the clauses in that read.
      statement = propertyScanSql(p.tenantId, filter, order, params, columns, after);
    } else {
      const where = itemWhere(p.tenantId, filter, params);
      statement = `SELECT ${columns} FROM items i WHERE ${where}${after ? ` AND ${after('i')}` : ''} ORDER BY ${orderBy(order, 'i')}`;
    }
    params.push(limit + 1);
    const rows: Array<Bounded<ItemRow & { position_value: string }> & ScannedRow> = await this.db.query(
      byteBoundedPage(`${statement} LIMIT $${params.length}`, orderBy(order), ITEM_BYTES),
      params,
    );
    const scanEnd = scanEndOf(rows, limit);
    const { page, next_cursor } = scanEnd
      ? { page: scanEnd.page, next_cursor: cursorAfter(order, scanEnd.last) }
      : pageWith(rows, limit, (last) => cursorAfter(order, last));
    return { items: await this.presentMany(p, page), next_cursor };
  }

  async versions(p: Principal, id: string, q: VersionsQuery): Promise<ItemVersionList> {
    await this.findVisible(this.db.manager, p, id);
    const limit = q.limit ?? 50;
    const rows: Array<Bounded<VersionRow>> = await this.db.query(
      byteBoundedPage(
        `SELECT version, snapshot, changed_by, created_at FROM item_versions
          WHERE tenant_id = $1 AND item_id = $2 AND ($3::int IS NULL OR version < $3)
          ORDER BY version DESC LIMIT $4`,
        'version DESC',
        'octet_length(snapshot::text)',
      ),
      [p.tenantId, id, q.before ?? null, limit + 1],
    );
    const more = rows.length > limit || cutShort(rows);
    if (rows.length > limit) rows.pop();
    return { next_before: more ? rows[rows.length - 1].version : null, versions: rows.map((r) => toVersion(p, r)) };
  }

  async version(p: Principal, id: string, version: number): Promise<ItemVersion> {
    await this.findVisible(this.db.manager, p, id);
    const row = await this.revision(this.db.manager, p.tenantId, id, version);
    if (!row) throw noSuchVersion(version);
    return toVersion(p, row);
  }

  // ---------------------------------------------------------------- helpers

  /**
   * A type the caller may not read is answered as one that does not exist, as GET /types/{name}
   * answers it: a 403 would tell a member which types the tenant has.
   */
  private async writableType(m: EntityManager, p: Principal, name: string): Promise<ResolvedType> {
    const type = await this.types.forWrite(p.tenantId, name, m);
    if (!type || !(await this.typeCatalog.can(p, name, 'read'))) throw ApiError.badRequest('invalid_type', `Unknown type "${name}"`, { type: name });
    if (!(await this.typeCatalog.can(p, name, 'write'))) throw typeNotPermitted(name);
    return type;
  }

  private async validateProperties(type: ResolvedType, properties: Record<string, unknown>): Promise<void> {
    const error = await propertiesError(type, properties);
    if (error) throw error;
  }

  /**
   * Every `sha256:<hex>` string in the properties must name a blob of this tenant. Checked in
   * the write's transaction `m`, which keeps the blobs found locked until it ends (findMissing):
   * a deletion of one of them waits for the write and then sees its item.
   */
  async assertBlobsExist(p: Principal, properties: Record<string, unknown>, m?: EntityManager): Promise<void> {
    const refs = blobReferences(properties);
    if (!refs.length) return;
    const missing = new Set(await this.blobs.findMissing(p.tenantId, refs.map((r) => r.ref), m));
    const fields = refs.filter((r) => missing.has(r.ref)).map((r) => ({ field: `properties.${r.path}`, message: `refers to blob ${r.ref}, which does not exist` }));
    if (fields.length) throw validationError(fields, 'The properties refer to blobs that do not exist');
  }

  private assertMetadataWrite(p: Principal, tags: string[] | undefined, extensions: ExtensionsPatch | undefined): void {
    if (tags !== undefined && !canMetadata(p, 'write')) throw ApiError.forbidden('Writing tags needs the metadata:write scope');
    for (const ns of Object.keys(extensions ?? {})) {
      if (!isDottedName(ns)) throw validationError([{ field: `extensions.${ns}`, message: 'namespace must be a dotted lowercase name' }]);
      if (!canExtension(p, ns, 'write')) {
        throw new ApiError(403, 'forbidden', `This credential may not write extension namespace ${ns}`, { namespace: ns });
      }
    }
  }

  /**
   * An edge clause naming an edge type the caller may not read is 403; `*` ("any edge type") means
   * any the caller may read, as in GET /items/{id}/edges, rather than a type named `*`.
   */
  private async narrowEdgeClauses(p: Principal, clauses: EdgeClause[]): Promise<void> {
    for (const c of clauses) {
      if (canEdgeType(p, c.edgeType, 'read')) continue;
      if (c.edgeType !== '*') throw new ApiError(403, 'forbidden', `This credential may not read edges of type ${c.edgeType}`, { edge_type: c.edgeType });
      c.readableEdgeTypes = (await this.edgeTypes.readableNames(p)) ?? [];
    }
  }

  /** Sets `few` on each clause that at most FEW_EDGE_MATCHES edges match (item-filter.ts). */
  private async markFewMatches(p: Principal, edges: EdgeClause[], backrefs: EdgeClause[]): Promise<void> {
    const clauses = [...edges.map((c) => [c, 'edge'] as const), ...backrefs.map((c) => [c, 'backref'] as const)];
    for (const [c, kind] of clauses) {
      const { sql, params } = edgeMatchesSql(p.tenantId, c, kind);
      const [{ n }]: Array<{ n: number }> = await this.db.query(sql, params);
      c.few = n <= FEW_EDGE_MATCHES;
    }
  }

  /**
   * Where `cursor` starts a page of `order`. A property cursor carrying a long value's digest
   * starts after its item's value, while that is still the value it carried: 409 `conflict`
   * once it changed (or the item is gone), as the walk no longer knows where it was. Only an
   * item of a type the caller may read is looked at: else a forged cursor would tell whether a
   * guessed value is that of an item it cannot see.
   */
  private async listingPosition(p: Principal, filter: ItemFilter, order: ListingOrder, cursor: string | undefined): Promise<ListingPosition | undefined> {
    const position = positionOf(order, cursor);
    if (!position || !order.path || !isDigest(position.value)) return position;
    const current = await longValuePosition(this.db.manager, position, order, p.tenantId, filter.permittedTypes);
    if (!current) {
      throw ApiError.conflict('conflict', 'The item this cursor ends at has changed its sort value since (or is gone): list again from the first page', {
        field: 'cursor',
      });
    }
    return current;
  }

  /**
   * The filter's first window on another column than the page's order that holds at most
   * FEW_WINDOW_ITEMS items (`windowItemsSql`), from which the page is read; none when there is none.
   */
  private async fewItemsWindow(p: Principal, filter: ItemFilter, order: ListingOrder): Promise<Window | undefined> {
    for (const w of windowsOf(filter)) {
      if (w.key === order.key) continue;
      const { sql, params } = windowItemsSql(p.tenantId, w);
      const [{ n }]: Array<{ n: number }> = await this.db.query(sql, params);
      if (n <= FEW_WINDOW_ITEMS) return w;
    }
    return undefined;
  }

  /** Locks an item the caller can see (404 otherwise, including when its type is unreadable). */
  private lockVisible(m: EntityManager, p: Principal, id: string): Promise<ItemRow> {
    return this.findVisible(m, p, id, ITEM_WRITE_LOCK);
  }

  /** An item the caller can see; 404 item_not_found also when its type is unreadable. */
  private async findVisible(m: EntityManager, p: Principal, id: string, lock: '' | typeof ITEM_WRITE_LOCK = ''): Promise<ItemRow> {
    const rows: ItemRow[] = await m.query(`SELECT ${ITEM_COLUMNS} FROM items WHERE tenant_id = $1 AND id = $2${lock}`, [p.tenantId, id]);
    if (!rows[0] || !(await this.typeCatalog.can(p, rows[0].type, 'read'))) throw notFound();
    return rows[0];
  }

  private async lockByNaturalKey(m: EntityManager, p: Principal, sourceId: string): Promise<ItemRow | undefined> {
    const rows: ItemRow[] = await m.query(
      `SELECT ${ITEM_COLUMNS} FROM items WHERE tenant_id = $1 AND source = $2 AND source_id = $3${ITEM_WRITE_LOCK}`,
      [p.tenantId, p.source, sourceId],
    );
    return rows[0];
  }

  /** Revision `version` of the item, or undefined when it has none. */
  private async revision(m: EntityManager, tenantId: string, id: string, version: number): Promise<VersionRow | undefined> {
    const rows: VersionRow[] = await m.query(
      `SELECT version, snapshot, changed_by, created_at FROM item_versions WHERE tenant_id = $1 AND item_id = $2 AND version = $3`,
      [tenantId, id, version],
    );
    return rows[0];
  }

  private async snapshot(m: EntityManager, tenantId: string, id: string, version: number): Promise<ItemRow | undefined> {
    return (await this.revision(m, tenantId, id, version))?.snapshot;
  }

  private async present(p: Principal, row: ItemRow, m?: EntityManager): Promise<Item> {
    return (await this.presentMany(p, [row], m))[0];
  }

  /** Items as the caller may see them, with their outgoing edges. */
  async presentMany(p: Principal, rows: ItemRow[], m?: EntityManager): Promise<Item[]> {
    const edges = await this.edges.outgoingFor(p, rows.map((r) => r.id), m);
    return rows.map((r) => toItem(p, r, edges.get(r.id)));
  }

  /** `presentMany` for rows whose statement also selected `outgoingEdgesSql` as `outgoing`: no second query. */
  async presentWithFetchedEdges(p: Principal, rows: Array<ItemRow & { outgoing: FetchedOutgoingEdge[] | null }>): Promise<Item[]> {
    const edges = await this.edges.outgoingFromFetched(p, rows);
    return rows.map((r) => toItem(p, r, edges.get(r.id)));
  }
}
