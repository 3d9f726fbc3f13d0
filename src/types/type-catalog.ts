/**
 * The tenant's types as permissions see them (names and parent chains), which every item, edge
 * and event check reads: cached per instance so those checks cost no query, and dropped on every
 * instance when a type is added or removed. Also the catalogue's lock, which orders type changes
 * against item writes.
 */
import { Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { canType, isAdmin } from '../auth/permissions';
import type { Principal } from '../auth/principal';
import { matchesPattern, TypeRef } from '../common/type-pattern';
import { orTimeout } from '../common/timeout';
import { RedisPubSub, REDIS_WAIT_MS } from '../redis/redis.module';
import { CORE_TENANT } from './core-types';

/**
 * The advisory lock of a tenant's type catalogue, until the transaction ends: exclusive to
 * change it, shared to write items (forWrite).
 */
export function lockCatalogue(m: EntityManager, tenantId: string, mode: 'exclusive' | 'shared'): Promise<unknown> {
  const fn = mode === 'shared' ? 'pg_advisory_xact_lock_shared' : 'pg_advisory_xact_lock';
  return m.query(`SELECT ${fn}(hashtext($1))`, [`types:${tenantId}`]);
}

/**
 * The tenant's types (core ones included) with their parent chains, so that patterns and
 * permissions can see subtypes. Lookups are synchronous once the catalog is loaded.
 */
export class TypeCatalog {
  private readonly refs = new Map<string, TypeRef>();

  constructor(rows: Array<{ name: string; parent: string | null }>) {
    const parents = new Map(rows.map((r) => [r.name, r.parent]));
    for (const { name } of rows) {
      const ancestors: string[] = [];
      for (let up = parents.get(name); up && !ancestors.includes(up); up = parents.get(up)) ancestors.push(up);
      this.refs.set(name, { name, ancestors });
    }
  }

  /** The type as patterns see it; an unknown name has no ancestors. */
  ref(name: string): TypeRef {
    return this.refs.get(name) ?? { name, ancestors: [] };
  }

  names(): string[] {
    return [...this.refs.keys()];
  }

  has(name: string): boolean {
    return this.refs.has(name);
  }

  /** Names of the types a pattern covers, subtypes included. */
  matching(pattern: string): string[] {
    return [...this.refs.values()].filter((r) => matchesPattern(pattern, r)).map((r) => r.name);
  }
}

/**
 * The tenant's type lineage, core types included, as it stands inside `m` (a transaction, or the
 * pool for the cache): names and parents only (150 types at the schema limits were 28 MB of JSON a
 * read). GET /types reads a page of its own.
 */
export async function lineageIn(m: EntityManager, tenantId: string): Promise<TypeCatalog> {
  return new TypeCatalog(await m.query('SELECT name, parent FROM item_types WHERE tenant_id IN ($1, $2)', [tenantId, CORE_TENANT]));
}

const CATALOG_CHANNEL = 'types:changed';
const CATALOG_TTL_MS = 60_000;
/** Tenants whose catalogue one instance keeps at once, as the credential cache bounds its keys. */
const MAX_CATALOGS = 10_000;

@Injectable()
export class TypeCatalogService implements OnModuleInit {
  private readonly logger = new Logger('Types');
  private readonly catalogs = new Map<string, { catalog: Promise<TypeCatalog>; expires: number }>();

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly pubsub: RedisPubSub,
  ) {}

  async onModuleInit(): Promise<void> {
    await this.pubsub.subscribe(CATALOG_CHANNEL, (tenantId) => this.catalogs.delete(tenantId));
    // Notices sent while the subscription was away are lost: whatever is cached may be stale.
    this.pubsub.onResubscribed(() => this.catalogs.clear());
  }

  /**
   * The tenant's type catalog, cached per instance. A type's parent never changes, so the
   * cache only goes stale when types are added or removed; those changes invalidate it on
   * every instance through Redis, and the TTL bounds a lost message.
   */
  catalog(tenantId: string): Promise<TypeCatalog> {
    const now = Date.now();
    const hit = this.catalogs.get(tenantId);
    if (hit && hit.expires > now) return hit.catalog;
    // Each catalogue is set anew at the newest end, so the map is in the order its entries
    // expire: those past their TTL go from the front, and the cache holds only the tenants seen
    // within it (not every tenant seen since the process started), MAX_CATALOGS at most.
    for (const [id, entry] of this.catalogs) {
      if (entry.expires > now && this.catalogs.size < MAX_CATALOGS) break;
      this.catalogs.delete(id);
    }
    const catalog = lineageIn(this.db.manager, tenantId);
    catalog.catch(() => this.catalogs.delete(tenantId));
    this.catalogs.set(tenantId, { catalog, expires: now + CATALOG_TTL_MS });
    return catalog;
  }

  /** An item type as the permission check needs it. */
  async ref(tenantId: string, name: string): Promise<TypeRef> {
    return (await this.catalog(tenantId)).ref(name);
  }

  /** canType with the type's lineage: `parent.*` grants cover subtypes whatever their names. */
  async can(p: Principal, typeName: string, access: 'read' | 'write'): Promise<boolean> {
    return isAdmin(p) || canType(p, await this.ref(p.tenantId, typeName), access);
  }

  /**
   * Names of the tenant's types the caller may access, for narrowing item queries in SQL;
   * undefined means all (admins). Resolved against the real type list so that the
   * most-specific-pattern rule applies exactly as in canType.
   */
  async permittedTypeNames(p: Principal, access: 'read' | 'write'): Promise<string[] | undefined> {
    if (isAdmin(p)) return undefined;
    const catalog = await this.catalog(p.tenantId);
    return catalog.names().filter((name) => canType(p, catalog.ref(name), access));
  }

  /**
   * After a change has committed: this instance's catalogue is dropped, and the others are told
   * through Redis. The change stands whatever Redis does, so the answer must not depend on it
   * (a 503 would say nothing was kept; a silent Redis held the answer until its connection
   * reset): the notice is waited for at most REDIS_WAIT_MS, and an instance that misses it
   * reads the change once its catalogue expires (CATALOG_TTL_MS).
   */
  async changed(tenantId: string): Promise<void> {
    this.catalogs.delete(tenantId);
    await orTimeout(this.pubsub.publish(CATALOG_CHANNEL, tenantId), REDIS_WAIT_MS, 'type catalogue notice').catch((err: unknown) =>
      this.logger.warn({ err, tenantId }, 'other instances not told of a type change; their catalogues catch up when they expire'),
    );
  }

}
