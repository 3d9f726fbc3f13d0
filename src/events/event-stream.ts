/**
 * Server-sent events (`GET /events`): every instance subscribes to the relay's Redis channel
 * and writes each event to its own open streams of that tenant, filtered like webhooks
 * (`events`, `type_filter`) and by what the stream's bearer token may read now (resolved again,
 * cached under the revocation generation, before each batch is written); a stream whose token is
 * no longer accepted (its key, grant or client revoked, the access token itself revoked or
 * expired) gets nothing more, and an idle one is disconnected at the next check (every
 * CREDENTIAL_CHECK_MS). Resolved as the token, a stream never widens: an OAuth token's stream
 * keeps to that token's scopes however wide its client or grant is, so only a narrowing or an
 * end takes effect.
 *
 * Open streams are capped per credential, per user and per tenant across instances (stream-slots.ts):
 * past the cap, 429 `rate_limited` before the stream starts. A stream holds its slot until its
 * connection is gone, not merely until it is told to end: a client that does not read would
 * otherwise keep its buffers while its slot went to another stream. A client that falls more
 * than MAX_BUFFERED_BYTES behind, or stops taking anything (stream-backlog.ts), is cut off.
 *
 * Resuming: with `Last-Event-ID` the stream first replays the tenant's events published after
 * that one from the outbox (kept EVENT_RETENTION_DAYS), while live events wait, then goes live
 * without gaps or repeats. An event whose relay died, or lost its database session, before
 * recording it is published again once its relay lease lapses, at a new place, carrying its first
 * place (`first_published_seq`): a stream that heard that place live had it then (sent, or not
 * for it), and one opened without Last-Event-ID after it began after the event, so either leaves
 * the copy out however much came in between (`heardAtFirstPlace`). A stream that passed the
 * place in a replay may have read the event already moved, and gets the copy unless it is among
 * the ids it remembers (SEEN_IDS): at least once.
 * Both follow the relay's publication order (`published_seq`, see event-relay.ts), not the
 * order writers inserted their events in: a transaction that commits
 * late publishes its events after those of transactions that committed before it, and a replay
 * finds them in that same place. Events not published yet are not replayed; they come live.
 * An id the outbox no longer has (too old, or unknown) is answered with a `stream.reset` event
 * before going live, so the client knows to resynchronise. When the live subscription itself is
 * lost (Redis went away) and comes back, open streams catch up the same way, from where each
 * was served to (`catchUp`).
 *
 * A stream that cannot deliver what it owes ends rather than going on past a hole its client
 * could not notice: a live batch, a replay or a catch-up that fails (the type catalogue or the
 * outbox unreadable a moment) closes it, and its client resumes with Last-Event-ID. A stream's
 * sends run one after another (`inTurn`): a catch-up waits for a live batch being sent to it.
 */
import { BeforeApplicationShutdown, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { FastifyReply } from 'fastify';
import { DataSource } from 'typeorm';
import { bearerToken } from '../auth/credential.hook';
import type { Principal } from '../auth/principal';
import { Bounded, cutShort } from '../common/pagination';
import { AppConfig } from '../config/app-config';
import { CredentialsService } from '../auth/credentials.service';
import { RedisPubSub } from '../redis/redis.module';
import { TypeCatalogService } from '../types/type-catalog';
import { EVENT_COLUMNS, mayReceive, renderBody, selects } from './event-catalogue';
import { PublishedEvent, REPLAY_PAGE, REPLAY_PAGE_BYTES, REPLAY_PAGE_QUERY, replayedNames, resumePoint } from './published-events';
import { Backlog, cutOff, endWithin } from './stream-backlog';
import { SLOT_RENEW_MS, StreamSlot, StreamSlots } from './stream-slots';
import { CHANNEL, isRef, messagesOf, Published, PublishedRef, PublishedThrough } from './stream-messages';

/** A stream's headers: no cache nor proxy (nginx) may hold its events back. */
const STREAM_HEADERS = { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-store, no-transform', 'X-Accel-Buffering': 'no' };
const CREDENTIAL_CHECK_MS = 2000;
/** A client this far behind is cut off; it can resume with Last-Event-ID. */
const MAX_BUFFERED_BYTES = 8 * 1024 * 1024;
/** How long a stream told to end (revoked, shutting down) waits for its client to take the end before it is cut off. */
const CLOSE_GRACE_MS = 5000;
const SEEN_IDS = 2000;

export interface StreamFilter {
  events: string[];
  typeFilter: string[] | null;
}

interface Subscriber {
  principal: Principal;
  /** The bearer token that opened the stream: the stream lasts while it would still be accepted. */
  token: string;
  slot: StreamSlot;
  filter: StreamFilter;
  reply: FastifyReply;
  /** Live events held back while the replay runs. */
  held: PublishedEvent[] | null;
  /** How far the replay got in the publication order: held events up to there were replayed, or precede Last-Event-ID. */
  replayedTo?: string;
  /** How far this stream has been served in the publication order (sent, or not for it): where a catch-up starts. */
  position?: string;
  /** The subscription was lost and came back while a replay ran: catch up again once it is done. */
  behind?: boolean;
  /** Ids written lately, and Last-Event-ID's: an event can arrive both by replay and live, or twice after its relay's lease lapsed. */
  seen: Set<string>;
  /** Opened without Last-Event-ID: the place the tenant's events had reached then. Events first published up to it are not owed. */
  openedAt?: string;
  /** The place after which the stream has been live without a break; unset while it replays or catches up. */
  liveAfter?: string;
  /** Earlier such stretches, as [after, through]: the places this stream heard live, each event as it was then. */
  heardLive: Array<[string, string]>;
  /** Whether the client is taking what it is sent. */
  backlog: Backlog;
  /** The last live batch or catch-up started for this stream: the next starts once it is done (`inTurn`). */
  turn: Promise<void>;
}

@Injectable()
export class EventStream implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('Events');
  private readonly subscribers = new Set<Subscriber>();
  /** Streams being opened: not yet among the subscribers. */
  private opening = 0;
  /** The highest publication number heard while streams were open (noticeGap). */
  private heard?: bigint;
  /**
   * The first number heard since then: a hole before it went unnoticed (no batch before it to
   * notice one by), so no stream here heard places before it live.
   */
  private heardFrom?: bigint;
  private timers: NodeJS.Timeout[] = [];
  private stopping = false;
  /** Live events are handled one after another, so each stream sees them in arrival order. */
  private chain: Promise<void> = Promise.resolve();

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly config: AppConfig,
    private readonly pubsub: RedisPubSub,
    private readonly credentials: CredentialsService,
    private readonly typeCatalog: TypeCatalogService,
    private readonly slots: StreamSlots,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.pubsub.subscribe(CHANNEL, (message) => {
      // Every instance hears every published event, each with its whole item: with no stream
      // open or opening here there is nobody to parse it for (a 1 MB item cost 70 ms per
      // instance). A stream opened later replays from the outbox what it is owed.
      if (this.subscribers.size === 0 && this.opening === 0) return void (this.heard = this.heardFrom = undefined);
      const batch = JSON.parse(message) as Published[] | PublishedThrough;
      this.chain = this.chain
        .then(() => {
          if (!Array.isArray(batch)) return this.noticeMissed(BigInt(batch.through));
          this.noticeGap(batch);
          return this.dispatch(batch);
        })
        .catch((err: unknown) => this.logger.warn({ err }, 'event stream dispatch failed'));
    });
    this.pubsub.onResubscribed(() => this.catchUp());
    const heartbeat = setInterval(() => this.subscribers.forEach((s) => this.beat(s)), this.config.EVENTS_HEARTBEAT_SECONDS * 1000);
    const credentials = setInterval(() => void this.recheckCredentials(), CREDENTIAL_CHECK_MS);
    const slots = setInterval(() => void this.slots.renew().catch((err: unknown) => this.logger.warn({ err }, 'stream slots not renewed')), SLOT_RENEW_MS);
    this.timers = [heartbeat, credentials, slots];
    this.timers.forEach((t) => t.unref());
  }

  /**
   * Before the HTTP server closes, which would otherwise wait for every open stream. From here on
   * no stream opens (sendAway): a client told `retry: 3000` comes back within the other shutdown
   * hooks, and its new stream would hold the server open until the deadline.
   */
  beforeApplicationShutdown(): void {
    this.stopping = true;
    this.timers.forEach(clearInterval);
    for (const s of this.subscribers) this.close(s);
  }

  /** Called by the relay with each dispatched batch. */
  async publish(events: PublishedEvent[]): Promise<void> {
    for (const message of messagesOf(events)) await this.pubsub.publish(CHANNEL, message);
  }

  /**
   * Called by a relay that could not publish batches numbered up to `through` (it had lost
   * Redis), once Redis takes its messages again and it has no later batch to publish: open
   * streams that have not heard that far catch up from the outbox (`noticeMissed`), rather than
   * waiting for whatever batch comes next.
   */
  async publishThrough(through: string): Promise<void> {
    const notice: PublishedThrough = { through };
    await this.pubsub.publish(CHANNEL, JSON.stringify(notice));
  }

  /**
   * Takes over the response: headers, replay after `lastEventId`, then live events until the
   * client leaves. 429 `rate_limited` (nothing taken over) when the credential, its user or its
   * tenant already has as many streams open as allowed.
   */
  async open(principal: Principal, filter: StreamFilter, lastEventId: string | undefined, reply: FastifyReply): Promise<void> {
    if (this.stopping) return this.sendAway(reply);
    // Until the stream is among the subscribers, events it will be owed (those after its
    // starting position) must still be parsed and dispatched.
    this.opening++;
    try {
      return await this.start(principal, filter, lastEventId, reply);
    } finally {
      this.opening--;
    }
  }

  /**
   * A stream asked of an instance shutting down: a 200 that tells the client when to come back
   * and ends at once. An EventSource (WHATWG, eventsource@3+) takes any other status as final and
   * never reconnects, and its own reconnection after `close` lands here.
   */
  private sendAway(reply: FastifyReply): void {
    reply.hijack();
    reply.raw.writeHead(200, { ...(reply.getHeaders() as Record<string, string>), ...STREAM_HEADERS, Connection: 'close' });
    reply.raw.end(': this instance is shutting down; reconnect with Last-Event-ID\nretry: 3000\n\n');
  }

  private async start(principal: Principal, filter: StreamFilter, lastEventId: string | undefined, reply: FastifyReply): Promise<void> {
    // Settled before the answer starts: a database that cannot say where the resume starts is
    // a 503 to retry, not a stream that would have to end as soon as it began.
    const resumeAfter = lastEventId === undefined ? undefined : await resumePoint(this.db, principal.tenantId, lastEventId, this.config.EVENT_RETENTION_DAYS);
    // HEAD gets the headers GET would, 429 at the cap included, and holds no slot after.
    let slot: StreamSlot | undefined = await this.slots.take(principal);
    if (reply.request.method === 'HEAD') {
      void this.slots.release(slot);
      slot = undefined;
    }
    reply.hijack();
    reply.raw.writeHead(200, { ...(reply.getHeaders() as Record<string, string>), ...STREAM_HEADERS, Connection: 'keep-alive' });
    if (!slot) return void reply.raw.end();
    const token = bearerToken(reply.request.headers.authorization)!; // the caller authenticated with it
    const sub: Subscriber = { principal, token, slot, filter, reply, held: resumeAfter === undefined ? null : [], seen: new Set(lastEventId === undefined ? [] : [lastEventId]), heardLive: [], backlog: new Backlog(), turn: Promise.resolve() };
    // Where a catch-up would start if the live subscription is lost; without it, such a stream is closed instead.
    if (lastEventId === undefined) {
      sub.position = await this.latestPosition(principal.tenantId).catch(() => undefined);
      if (sub.position !== undefined) sub.openedAt = sub.liveAfter = sub.position;
    }
    reply.raw.on('close', () => this.forget(sub));
    // The client left while the slot was taken. Its socket says so: the request stream is also
    // destroyed once a body sent with the GET has been read to its end (protocol-errors.ts).
    if (reply.raw.destroyed || reply.request.raw.socket?.destroyed !== false) return this.forget(sub);
    this.subscribers.add(sub);
    this.write(sub, 'retry: 3000\n\n');
    if (resumeAfter === undefined) return;
    try {
      await this.replay(sub, resumeAfter);
    } catch (err) {
      // Going live would skip what the replay did not send; its held events, past that, are not sent either.
      this.logger.warn({ err, tenantId: principal.tenantId }, 'event stream could not replay after Last-Event-ID; closing it so its client resumes');
      return this.close(sub);
    }
    await this.goLive(sub);
  }

  /**
   * Sends the held events the replay did not cover, then lets live events through. Events that
   * arrive while held ones are being sent are held too, so nothing overtakes them. A batch missed
   * meanwhile (`behind`) is caught up on first: the held events past it wait for that replay,
   * which covers them, as they were published before it reads.
   */
  private async goLive(sub: Subscriber): Promise<void> {
    // Held events after the replay's last were heard live, in their places then.
    sub.liveAfter = sub.replayedTo ?? sub.position;
    if (this.heardFrom !== undefined) startLiveAt(sub, String(this.heardFrom - 1n));
    while (sub.held?.length && !sub.behind) {
      const held = sub.held;
      sub.held = [];
      const after = sub.replayedTo;
      // Publication numbers grow in the order the relays publish; an event without one came from a relay that assigns none.
      await this.deliver(sub, after === undefined ? held : held.filter((e) => e.published_seq === undefined || compareSeq(e.published_seq, after) > 0));
      if (!this.subscribers.has(sub)) return;
    }
    if (!sub.behind) return void (sub.held = null);
    // Within the stream's turn already (a catch-up), or before any live send to it (its first replay).
    sub.behind = false;
    sub.held ??= [];
    pauseLive(sub);
    await this.replayFromPosition(sub);
  }

  /**
   * Batches are published in `published_seq` order, one number after another, by whichever
   * instance relays them. A batch whose numbers do not follow the last one heard was numbered
   * but not heard here: its relay could not publish it (that instance had lost Redis; its numbers
   * stand, and webhooks still get it), or this subscription missed it. Open streams then catch
   * up from the outbox before the batch is sent, as after a lost subscription. A number skipped
   * for another reason (a claim rolled back) costs one catch-up that finds nothing.
   */
  private noticeGap(events: Published[]): void {
    const numbers = events.flatMap((e) => (e.published_seq === undefined ? [] : [BigInt(e.published_seq)]));
    if (!numbers.length) return;
    const first = numbers.reduce((a, b) => (b < a ? b : a));
    const last = numbers.reduce((a, b) => (b > a ? b : a));
    if (this.heard !== undefined && first > this.heard + 1n) this.catchUp();
    if (this.heard === undefined) this.hearFrom(first);
    if (this.heard === undefined || last > this.heard) this.heard = last;
  }

  /**
   * The first batch heard since streams opened here, at `first`: live stretches start no earlier,
   * so that an event first numbered before it but never published there (its relay died) is not
   * taken as heard when it comes again.
   */
  private hearFrom(first: bigint): void {
    this.heardFrom = first;
    this.subscribers.forEach((sub) => startLiveAt(sub, String(first - 1n)));
  }

  /** Batches up to `through` were numbered, and some may not have been heard here. */
  private noticeMissed(through: bigint): void {
    if (this.heard !== undefined && through <= this.heard) return;
    if (this.heard === undefined) this.hearFrom(through + 1n);
    this.heard = through;
    this.catchUp();
  }

  /**
   * The live subscription was lost and is back (Redis went away), or missed a batch: what was
   * published meanwhile never arrives, so each stream replays from where it was served to, as a
   * Last-Event-ID resume does, without closing. A stream with no such place (opened while the
   * database was away) is closed; its client reconnects, with Last-Event-ID if it got any event.
   */
  private catchUp(): void {
    for (const sub of this.subscribers) {
      if (sub.held) sub.behind = true; // a replay under way: again once it is done
      else if (sub.position === undefined) this.close(sub);
      else {
        // Live events are held from now on; the replay starts once a live batch being sent is done
        // (onResubscribed runs outside the chain), so that their writes never interleave.
        sub.held = [];
        pauseLive(sub);
        void this.inTurn(sub, () => this.replayFromPosition(sub));
      }
    }
  }

  /** Replays from where the stream was served to (its live events held meanwhile), then lets them through. */
  private async replayFromPosition(sub: Subscriber): Promise<void> {
    if (!this.subscribers.has(sub)) return;
    if (sub.position === undefined) return this.close(sub); // nowhere to catch up from: its client resumes instead
    try {
      await this.replayAfter(sub, sub.position);
    } catch (err) {
      this.logger.warn({ err, tenantId: sub.principal.tenantId }, 'event stream could not catch up; closing it so its client resumes');
      return this.close(sub);
    }
    await this.goLive(sub);
  }

  /** Runs `work` on the stream once what was started on it before is done. */
  private inTurn(sub: Subscriber, work: () => Promise<void>): Promise<void> {
    const run = sub.turn.then(work);
    sub.turn = run.catch(() => undefined);
    return run;
  }

  /** The tenant's last publication number (0 before any). */
  private async latestPosition(tenantId: string): Promise<string> {
    const [row] = await this.db.query(
      `SELECT coalesce(max(published_seq), 0)::text AS at FROM events WHERE tenant_id = $1 AND published_seq IS NOT NULL`,
      [tenantId],
    );
    return row.at;
  }

  private async replay(sub: Subscriber, after: string | null): Promise<void> {
    if (after === null) {
      const reason = { reason: 'last_event_id_unknown', message: 'Events after this id are no longer kept (or it was never issued); resynchronise, then follow the live stream' };
      this.write(sub, `event: stream.reset\ndata: ${JSON.stringify(reason)}\n\n`);
      sub.position = await this.latestPosition(sub.principal.tenantId).catch(() => undefined);
      return;
    }
    await this.replayAfter(sub, after);
  }

  /** Replays the tenant's events published after `after`, in publication order. */
  private async replayAfter(sub: Subscriber, after: string): Promise<void> {
    const tenantId = sub.principal.tenantId;
    sub.position = after;
    // The relay commits an event's number before publishing it: an event this stream missed
    // live (published before it subscribed) is already visible here.
    for (;;) {
      sub.replayedTo = after;
      const page: Array<Bounded<PublishedEvent>> = await this.db.query(REPLAY_PAGE_QUERY, [tenantId, after, ...replayedNames(sub.filter.events)]);
      await this.send(sub, page);
      if (page.length) sub.replayedTo = page[page.length - 1].published_seq;
      if ((page.length < REPLAY_PAGE && !cutShort(page)) || !this.subscribers.has(sub)) return;
      after = sub.replayedTo;
      await this.drained(sub);
    }
  }

  /** Until the client has read what it was sent (or left): a replay reads no further ahead of it. */
  private async drained(sub: Subscriber): Promise<void> {
    const res = sub.reply.raw;
    if (res.destroyed || res.writableLength < REPLAY_PAGE_BYTES) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        res.off('drain', done);
        res.off('close', done);
        resolve();
      };
      res.on('drain', done);
      res.on('close', done);
    });
  }

  private async dispatch(published: Published[]): Promise<void> {
    let events: PublishedEvent[];
    try {
      events = await this.withBodies(published);
    } catch (err) {
      // The outbox has them, in order: the streams replay from where each was served to.
      this.logger.warn({ err }, 'large events could not be read from the outbox; catching streams up');
      return this.catchUp();
    }
    for (const sub of this.subscribers) {
      const mine = events.filter((e) => e.tenant_id === sub.principal.tenantId);
      if (!mine.length) continue;
      if (sub.held) sub.held.push(...mine);
      else await this.inTurn(sub, () => this.deliver(sub, mine));
    }
  }

  /** The batch with its references replaced by their events from the outbox, where a stream here may want them. */
  private async withBodies(published: Published[]): Promise<PublishedEvent[]> {
    const tenants = new Set([...this.subscribers].map((s) => s.principal.tenantId));
    const refs = published.filter((e): e is PublishedRef => isRef(e) && tenants.has(e.tenant_id));
    if (!refs.length) return published.filter((e): e is PublishedEvent => !isRef(e));
    const rows: PublishedEvent[] = await this.db.query(
      `SELECT ${EVENT_COLUMNS}, published_seq::text AS published_seq FROM events
        WHERE (tenant_id, id) IN (SELECT * FROM unnest($1::uuid[], $2::uuid[]))`,
      [refs.map((r) => r.tenant_id), refs.map((r) => r.id)],
    );
    const byId = new Map(rows.map((e) => [e.id, e]));
    // In the batch's order, each with the number it was published under (a later relay may have
    // numbered it again since; its stream position is this one).
    return published.flatMap((e) => {
      if (!isRef(e)) return [e];
      const row = byId.get(e.id);
      return row ? [{ ...row, published_seq: e.published_seq, first_published_seq: e.first_published_seq }] : [];
    });
  }

  /**
   * `send`, or the stream's end should it fail: nothing catches a stream up from an event it
   * missed live (the next batch would go out past it), while its client resumes with the
   * Last-Event-ID it has.
   */
  private async deliver(sub: Subscriber, events: PublishedEvent[]): Promise<void> {
    try {
      await this.send(sub, events);
    } catch (err) {
      this.logger.warn({ err, tenantId: sub.principal.tenantId }, 'event stream could not send events it owes; closing it so its client resumes');
      this.close(sub);
    }
  }

  private async send(sub: Subscriber, events: PublishedEvent[]): Promise<void> {
    if (!events.length) return;
    // As webhooks are, against the credential as it is now (a cached lookup): a key revoked or
    // narrowed a moment ago gets nothing it may no longer read, whatever the periodic check's timing.
    try {
      if (!(await this.refreshPrincipal(sub))) return;
    } catch {
      // the credential as last read; the periodic check decides
    }
    const types = await this.typeCatalog.catalog(sub.principal.tenantId);
    for (const e of events) {
      if (!this.subscribers.has(sub)) return; // closed meanwhile (too far behind): render nothing more
      const servedTo = sub.position;
      if (e.published_seq !== undefined && (servedTo === undefined || compareSeq(e.published_seq, servedTo) > 0)) sub.position = e.published_seq;
      if (sub.seen.has(e.id) || heardAtFirstPlace(sub, e, servedTo) || !selects(sub.filter.events, sub.filter.typeFilter, e, types) || !mayReceive(sub.principal, e, types)) continue;
      sub.seen.add(e.id);
      if (sub.seen.size > SEEN_IDS) sub.seen.delete(sub.seen.values().next().value!);
      this.write(sub, `id: ${e.id}\nevent: ${e.name}\ndata: ${renderBody(sub.principal, e, types)}\n\n`);
    }
  }

  private write(sub: Subscriber, text: string): void {
    const res = sub.reply.raw;
    if (res.destroyed || res.writableEnded) return;
    if (res.writableLength > MAX_BUFFERED_BYTES) return this.cutOff(sub);
    sub.backlog.before(res.writableLength);
    res.write(text);
    sub.backlog.after(res.writableLength);
  }

  private beat(sub: Subscriber): void {
    if (sub.backlog.stalled(sub.reply.raw.writableLength)) return this.cutOff(sub);
    this.write(sub, ': heartbeat\n\n');
  }

  /**
   * A stream ends once its token would no longer be accepted (its key, grant or client revoked, its key expired,
   * the access token itself revoked or expired); a narrowed one gets only what the token may
   * still read. The token's credential can be wider than the token (an OAuth client's or
   * grant's other scopes): resolved as the token, a stream never widens.
   */
  async recheckCredentials(): Promise<void> {
    for (const sub of this.subscribers) {
      try {
        await this.refreshPrincipal(sub);
      } catch {
        // the next check decides; a database hiccup must not drop every stream
      }
    }
  }

  /** The stream's token as it resolves now; false (the stream closed) once it does not. */
  private async refreshPrincipal(sub: Subscriber): Promise<boolean> {
    const now = await this.credentials.resolveBearer(sub.token);
    if (!('principal' in now)) {
      this.close(sub);
      return false;
    }
    sub.principal = now.principal;
    return true;
  }

  /** No more events; the stream ends once its client has taken what was sent (its slot is held until then). */
  private close(sub: Subscriber): void {
    this.subscribers.delete(sub);
    endWithin(sub.reply.raw, CLOSE_GRACE_MS);
  }

  /**
   * A client too far behind, or not reading at all: its buffers are freed now (a polite end would
   * wait behind them), and its slot once the connection is gone, which follows at once.
   */
  private cutOff(sub: Subscriber): void {
    this.subscribers.delete(sub);
    cutOff(sub.reply.raw);
  }

  /** The stream's connection is gone: its slot is free for another. */
  private forget(sub: Subscriber): void {
    this.subscribers.delete(sub);
    void this.slots.release(sub.slot);
  }
}

/** Live stretches a stream remembers: a stream past as many catch-ups gets older events' copies (at least once). */
const HEARD_LIVE_STRETCHES = 8;

/** The stream stops being live (a catch-up): the stretch it heard live is remembered. */
function pauseLive(sub: Subscriber): void {
  if (sub.liveAfter !== undefined && sub.position !== undefined && compareSeq(sub.position, sub.liveAfter) > 0) {
    sub.heardLive.push([sub.liveAfter, sub.position]);
    if (sub.heardLive.length > HEARD_LIVE_STRETCHES) sub.heardLive.shift();
  }
  sub.liveAfter = undefined;
}

/** A stream's live stretch starts no earlier than after `place`. */
function startLiveAt(sub: Subscriber, place: string): void {
  if (sub.liveAfter !== undefined && compareSeq(sub.liveAfter, place) < 0) sub.liveAfter = place;
}

/**
 * An event published again whose first place the stream heard live: it was sent then or was not
 * for the stream; or that came before the stream opened. Live stretches have no hole: a batch not
 * heard makes the stream catch up (noticeGap), which ends the stretch before it, and none starts
 * before the first batch heard (hearFrom).
 */
function heardAtFirstPlace(sub: Subscriber, e: PublishedEvent, servedTo: string | undefined): boolean {
  const first = e.first_published_seq;
  if (!first) return false;
  if (sub.openedAt !== undefined && compareSeq(first, sub.openedAt) <= 0) return true;
  const within = (after: string, through: string) => compareSeq(first, after) > 0 && compareSeq(first, through) <= 0;
  return (sub.liveAfter !== undefined && servedTo !== undefined && within(sub.liveAfter, servedTo)) || sub.heardLive.some(([after, through]) => within(after, through));
}

/** Order of bigints carried as text (`seq`, `published_seq`). */
export function compareSeq(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}
