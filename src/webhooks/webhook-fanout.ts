/**
 * Fan-out: which webhooks owe a delivery for a batch of events, and with which body. A webhook
 * gets an event when it is enabled, its `events` and `type_filter` select it, and the
 * credential that registered it may, as of now, read what the event is about: a key revoked
 * or narrowed since registration stops receiving. A webhook registered with an OAuth token
 * never gets more than that token's scopes (`credential_scopes`, see `withinTokenScopes`), however
 * wide its client or grant is or becomes. The body is rendered for that credential (unreadable
 * extension namespaces and edges left out); a later attempt is checked again the same way and
 * its body rendered afresh from the event (`recheck`), so a delivery's row holds no copy of it,
 * and checked against the webhook's `events` and `type_filter` as they are then (`stillSelects`). The dispatcher records each planned delivery with its
 * first attempt; one that waited in line while its webhook changed (webhook-changes.ts) or its
 * credential was revoked or changed (`registrantAsPlanned`) goes through its row and `recheck` too.
 */
import { Injectable } from '@nestjs/common';
import type { Principal } from '../auth/principal';
import { isId, newId } from '../common/ids';
import { BookkeepingDb } from '../database/bookkeeping-db';
import { Audience, EVENT_COLUMNS, mayReceive, renderBody, selects, StoredEvent } from '../events/event-catalogue';
import { CredentialsService } from '../auth/credentials.service';
import { withinTokenScopes } from '../oidc/scopes';
import { TypeCatalog, TypeCatalogService } from '../types/type-catalog';
import { PREVIOUS_SECRET } from './signature';
import { WebhookChanges } from './webhook-changes';
import type { Prepared } from './webhook-dispatcher';

/**
 * How long one look-up of an OAuth client or grant serves the first attempts about to be sent
 * (`registrantAsPlanned`): unlike an API key's, it is not cached, and a busy webhook starts
 * hundreds of attempts a second.
 */
const REGISTRANT_CHECK_MS = 1000;

/**
 * What a credential may do, as text to compare: two look-ups of an unchanged credential give
 * equal texts. Kept per Principal object, which the key cache hands out again and again until any
 * key changes, so a first attempt's check is usually a map look-up.
 */
const grants = new WeakMap<Principal, string>();
function grantsOf(p: Principal): string {
  let text = grants.get(p);
  if (text === undefined) grants.set(p, (text = JSON.stringify(p)));
  return text;
}

/** How long a later attempt's body serves other attempts of its event for the same owner. */
const RECENT_BODY_MS = 10_000;
/** Most bytes of such bodies, and most entries, kept for sharing; past either they are let go (attempts under way keep their own). */
const RECENT_BODY_BYTES = 32 * 1024 * 1024;
const RECENT_BODY_ENTRIES = 10_000;

type Rechecked = { body: Buffer } | null;
/** A shared body: its rendering, its size once rendered, until when it is shared, and the timer that lets it go then. */
type RecentBody = { types: TypeCatalog; result: Promise<Rechecked | undefined>; bytes: number; until: number; expiry?: NodeJS.Timeout };

/**
 * Later attempts' bodies rendered lately, by tenant, event and owner, for the type catalogue they
 * were rendered with (a change of types makes a new one): the retries of one event to the
 * webhooks of one owner come due together, and share one read of the event and one Buffer
 * (Prepared.body), rendering included while it runs, rather than each reading, rendering and
 * holding its own. A receiver that never answered held 1,600 attempts of 1 MB bodies of one
 * tenant's 100 webhooks, each read and rendered anew.
 */
export class RecentBodies {
  private readonly entries = new Map<string, RecentBody>();
  private bytes = 0;

  /**
   * `render`'s result for `key`, or one another attempt asked for lately (`shared`); undefined
   * (nothing to send) is not kept.
   */
  share(key: string, types: TypeCatalog, render: () => Promise<Rechecked | undefined>): { result: Promise<Rechecked | undefined>; shared: boolean } {
    const now = Date.now();
    const hit = this.entries.get(key);
    if (hit && hit.types === types && hit.until > now) return { result: hit.result, shared: true };
    if (hit) this.forget(key);
    if (this.bytes > RECENT_BODY_BYTES || this.entries.size >= RECENT_BODY_ENTRIES) this.trim(now);
    const entry: RecentBody = { types, result: render(), bytes: 0, until: now + RECENT_BODY_MS };
    this.entries.set(key, entry);
    entry.result.then(
      (result) => {
        if (this.entries.get(key) !== entry) return;
        if (result === undefined) return this.forget(key);
        entry.bytes = result?.body.length ?? 0;
        this.bytes += entry.bytes;
        // Counted once rendered: renderings that were under way together are let go here, past the cap.
        if (this.bytes > RECENT_BODY_BYTES) this.trim(Date.now());
        // A timer for an entry the trim let go would later forget a newer entry under its key.
        if (this.entries.get(key) !== entry) return;
        // Let go when it expires, not only when a later share finds it: an idle instance keeps none.
        // Cleared when the entry goes sooner (forget), so that its timer does not hold the body on.
        entry.expiry = setTimeout(() => this.forget(key), Math.max(0, entry.until - Date.now())).unref();
      },
      () => this.entries.get(key) === entry && this.forget(key),
    );
    return { result: entry.result, shared: false };
  }

  /** Lets go of the expired entries, and of all should that not be enough. */
  private trim(now: number): void {
    for (const [key, entry] of this.entries) if (entry.until <= now) this.forget(key);
    if (this.bytes <= RECENT_BODY_BYTES && this.entries.size < RECENT_BODY_ENTRIES) return;
    for (const key of [...this.entries.keys()]) this.forget(key);
  }

  private forget(key: string): void {
    const entry = this.entries.get(key);
    clearTimeout(entry?.expiry);
    this.bytes -= entry?.bytes ?? 0;
    this.entries.delete(key);
  }

  /** What is kept (tests). */
  get held(): { entries: number; bytes: number } {
    return { entries: this.entries.size, bytes: this.bytes };
  }
}

interface Subscription {
  tenant_id: string;
  id: string;
  url: string;
  secret_sealed: string;
  previous_secret_sealed: string | null;
  events: string[];
  type_filter: string[] | null;
  credential_id: string;
  credential_scopes: string[] | null;
}

@Injectable()
export class WebhookFanout {
  /** Per registering credential, as it is (null: revoked; undefined: the look-up failed), looked up at most REGISTRANT_CHECK_MS ago. */
  private readonly registrants = new Map<string, { now: Promise<Principal | null | undefined>; until: number }>();
  private readonly recentBodies = new RecentBodies();

  constructor(
    private readonly db: BookkeepingDb,
    private readonly credentials: CredentialsService,
    private readonly typeCatalog: TypeCatalogService,
    private readonly changes: WebhookChanges,
  ) {}

  /**
   * The deliveries the events owe, leased to this instance for `leaseMs`. For an event taken
   * up again after a relay died (`reclaimed`), deliveries already recorded are not planned twice.
   */
  async plan(events: Array<StoredEvent & { reclaimed?: boolean }>, leaseMs: number): Promise<Prepared[]> {
    const tenants = [...new Set(events.map((e) => e.tenant_id))];
    const plannedAt = this.changes.mark(); // before the webhooks are read: a change committed after counts
    const subscriptions = await this.db.query<Subscription>(
      `SELECT tenant_id, id, url, secret_sealed, ${PREVIOUS_SECRET('w')} AS previous_secret_sealed, events, type_filter, credential_id, credential_scopes
         FROM webhooks w WHERE tenant_id = ANY($1::uuid[]) AND NOT disabled`,
      [tenants],
    );
    if (!subscriptions.length) return [];
    const recorded = await this.recorded(events.filter((e) => e.reclaimed));
    const credentials = new Map<string, Principal | null>();
    const owners = new Map<string, Principal | null>();
    const planned: Prepared[] = [];
    for (const e of events) {
      const mine = subscriptions.filter((s) => s.tenant_id === e.tenant_id);
      if (!mine.length) continue;
      const types = await this.typeCatalog.catalog(e.tenant_id);
      const bodies = new Map<string, Buffer>(); // webhooks of one owner get the same body, one Buffer
      for (const s of mine) {
        if (!selects(s.events, s.type_filter, e, types) || recorded.has(`${e.id}:${s.id}`)) continue;
        const credentialKey = `${s.tenant_id}:${s.credential_id}`;
        if (!credentials.has(credentialKey)) credentials.set(credentialKey, await this.credentials.principalById(s.tenant_id, s.credential_id));
        // The owner is the credential held to the registering token's scopes: two tokens of one client can differ.
        const ownerKey = `${credentialKey}:${s.credential_scopes?.join(' ') ?? '*'}`;
        if (!owners.has(ownerKey)) {
          const now = credentials.get(credentialKey);
          owners.set(ownerKey, now ? withinTokenScopes(now, s.credential_scopes) : null);
        }
        const owner = owners.get(ownerKey);
        if (!owner || !mayReceive(owner, e, types)) continue;
        if (!bodies.has(ownerKey)) bodies.set(ownerKey, Buffer.from(renderBody(owner, e, types)));
        planned.push({
          tenantId: e.tenant_id,
          deliveryId: newId(),
          webhookId: s.id,
          event: e.name,
          eventId: e.id,
          body: bodies.get(ownerKey)!,
          attempts: 0,
          url: s.url,
          secretSealed: s.secret_sealed,
          previousSecretSealed: s.previous_secret_sealed,
          leaseUntil: Date.now() + leaseMs,
          plannedAt,
          credentialId: s.credential_id,
          credentialAsPlanned: credentials.get(credentialKey)!,
        });
      }
    }
    return planned;
  }

  /**
   * A later attempt (a retry, the sweeper's, an admin's) goes through the same check as the
   * fan-out, against the registering credential as of now: null when it may no longer receive
   * the event, so a key revoked or narrowed after the first attempt stops getting retries too.
   * The body is rendered afresh for the credential from the event, which is kept while a
   * delivery of it is pending (events-janitor.ts), and shared by the attempts of that event for
   * the same owner due meanwhile (RecentBodies); `{}` when the event is gone, for a delivery
   * stored with its body before migration 3700, whose credential's existence is then all that
   * can be checked. `sql`: the pool of the attempt's claim (the later attempts', unless it is a
   * first attempt sent through its row).
   */
  async recheck(
    tenantId: string,
    eventId: string,
    credentialId: string,
    credentialScopes: string[] | null,
    sql: BookkeepingDb['query'] = this.db.later,
  ): Promise<{ body?: Buffer } | null> {
    const now = await this.credentials.principalById(tenantId, credentialId);
    const owner = now ? withinTokenScopes(now, credentialScopes) : null;
    if (!owner) return null;
    const types = await this.typeCatalog.catalog(tenantId);
    const { result, shared } = this.recentBodies.share(`${tenantId}\n${eventId}\n${grantsOf(owner)}`, types, async () => {
      const [event] = await sql<StoredEvent>(`SELECT ${EVENT_COLUMNS} FROM events WHERE tenant_id = $1 AND id = $2`, [tenantId, eventId]);
      if (!event) return undefined;
      return mayReceive(owner, event, types) ? { body: Buffer.from(renderBody(owner, event, types)) } : null;
    });
    const rechecked = await result;
    // A body rendered for another attempt: its event must still be kept now, as when read for this one.
    if (rechecked === undefined || (shared && !(await sql(`SELECT FROM events WHERE tenant_id = $1 AND id = $2`, [tenantId, eventId])).length)) return {};
    return rechecked;
  }

  /**
   * Whether a webhook's `events` and `type_filter`, as they are now, still select a delivery's
   * event: a later attempt (or a first one sent through its row) of an event the webhook was
   * narrowed away from since it was planned is not sent. The event's stored audience says which
   * types `type_filter` matched when it was written; past EVENT_RETENTION_DAYS, the delivery row
   * keeps the event's name and, for an item event, the item's type in its body, which is all
   * `selects` reads then.
   */
  async stillSelects(
    tenantId: string,
    events: string[],
    typeFilter: string[] | null,
    event: { name: string; itemType: string | null; audience: Audience | null },
  ): Promise<boolean> {
    const audience = event.audience ?? (event.itemType === null ? {} : { item_type: event.itemType });
    return selects(events, typeFilter, { name: event.name, audience } as StoredEvent, await this.typeCatalog.catalog(tenantId));
  }

  /**
   * Whether the credential that registered a webhook is still as the plan read it (`planned`,
   * which the body was rendered for): checked by a first attempt just before it is sent, since it
   * may have waited in its webhook's line since it was planned. False once it is revoked, or
   * changed in what it may read (a key narrowed, a grant's scopes or a client's changed): the
   * attempt then goes through the row, and `recheck`, which renders the body again for the
   * credential as it is then or fails the delivery. An API key's look-up is cached under the key
   * generation, so a change holds from its answer; an OAuth client's or grant's within
   * REGISTRANT_CHECK_MS. False also when the look-up fails.
   */
  async registrantAsPlanned(tenantId: string, credentialId: string, planned: Principal | undefined): Promise<boolean> {
    const now = await this.registrant(tenantId, credentialId);
    return !!now && !!planned && (now === planned || grantsOf(now) === grantsOf(planned));
  }

  private registrant(tenantId: string, credentialId: string): Promise<Principal | null | undefined> {
    const lookUp = () => this.credentials.principalById(tenantId, credentialId).catch(() => undefined);
    if (isId(credentialId)) return lookUp();
    const key = `${tenantId}:${credentialId}`;
    const at = Date.now();
    const hit = this.registrants.get(key);
    if (hit && hit.until > at) return hit.now;
    if (this.registrants.size > 10_000) this.registrants.clear();
    const now = lookUp();
    this.registrants.set(key, { now, until: at + REGISTRANT_CHECK_MS });
    return now;
  }

  /** `<event>:<webhook>` of the deliveries already recorded for these events. */
  private async recorded(events: StoredEvent[]): Promise<Set<string>> {
    if (!events.length) return new Set();
    const rows = await this.db.query<{ pair: string }>(
      `SELECT d.event_id || ':' || d.webhook_id AS pair FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[]) AS e(tenant_id, id, created_at)
         JOIN webhooks w ON w.tenant_id = e.tenant_id
         JOIN webhook_deliveries d ON d.tenant_id = e.tenant_id AND d.webhook_id = w.id AND d.created_at >= e.created_at AND d.event_id = e.id`,
      [events.map((e) => e.tenant_id), events.map((e) => e.id), events.map((e) => e.created_at)],
    );
    return new Set(rows.map((r) => r.pair));
  }
}
