/**
 * Runs `@Idempotent()` routes, the only ones the decorator puts it on, at most once per
 * `Idempotency-Key` (as Stripe's API does). It acts when a caller's request carries the header
 * (the unauthenticated bootstrap POST /keys is never kept), after the guards (so auth and
 * permission failures are never kept) and around the pipes and handler (so a validation error
 * is kept and replayed like any other 4xx). The steps:
 *
 * 1. Check the header (400 `validation_error` naming `Idempotency-Key`).
 * 2. Claim (owner, key) in Postgres for this request's fingerprint (method, path as routed, query,
 *    canonical body, an OAuth token's scopes).
 * 3. Claimed: run the handler; keep its status and body, a 4xx error envelope included. 5xx,
 *    429, a write collision's 409 (the transaction lost to concurrent ones and changed nothing:
 *    "send it again") and any refusal about the moment rather than the request (a busy 409 with
 *    Retry-After, ApiError.busy) are not kept: the claim is released, so a retry runs again.
 *    The transaction that commits the work marks the claim `applied` as it commits
 *    (claim-applied.ts), so a claim whose response was never kept (the instance died, or the
 *    write failed) is not taken over and run again when its lease runs out. The request renews
 *    its claim's lease while it runs; one that was taken over meanwhile (it could not renew,
 *    the database being away) cannot commit its work (claim-applied.ts).
 * 4. Not claimed: another fingerprint is 409 `conflict`; a completed row is replayed (status,
 *    body, `Idempotent-Replayed: true`); a row still in progress (or applied) is polled until it
 *    completes (then replayed) or is released (then claimed), and after WAIT_MS is 409 `conflict`.
 *
 * Status, body and `Location` are replayed, not other headers the handler set. Routes must return
 * JSON-serialisable values; a streamed response is sent but not kept.
 */
import { CallHandler, ExecutionContext, Injectable, Logger, NestInterceptor, StreamableFile } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { from, lastValueFrom, Observable } from 'rxjs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Principal } from '../auth/principal';
import { tokenScopesOf } from '../oidc/scopes';
import { ApiError, retryAfterOf } from '../common/api-error';
import { toApiError } from '../common/exception.filter';
import { canonicalId } from '../common/ids';
import { isDependencyUnavailable, isWriteCollision } from '../common/unavailable';
import {
  IDEMPOTENT_REPLAYED_HEADER,
  keyConflict,
  keyDigest,
  KeyOwner,
  ownerOf,
  parseIdempotencyKey,
  requestFingerprint,
} from './idempotency-key';
import { pendingClaim } from './claim-applied';
import { AppConfig } from '../config/app-config';
import { Claim, IdempotencyStore, StoredKey } from './idempotency.store';
import { ResponseSeal } from './response-seal';

/** How long a retry waits for a concurrent request with its key before answering 409. */
const WAIT_MS = 10_000;
const FIRST_POLL_MS = 20;
const MAX_POLL_MS = 250;

/** Kept responses are final outcomes; these are worth retrying, so they are not kept. */
const keeps = (status: number) => status < 500 && status !== 429;

/**
 * The request's URL as the router took it, so that `/Items/` is the same request as `/items`:
 * the matched route with its parameters as sent, and the query. For a request spelt as the route
 * is (lower case, no trailing slash) it is the URL itself, as fingerprints were before.
 */
function routedUrl(req: FastifyRequest): string {
  const route = req.routeOptions.url;
  if (!route) return req.url;
  const params = req.params as Record<string, string>;
  const query = req.url.indexOf('?');
  // As the route's pipes read them, before they run: `/webhooks/ABC…/secret` is the same webhook.
  return route.replace(/:(\w+)/g, (_, name: string) => canonicalId(params[name] ?? '')) + (query < 0 ? '' : req.url.slice(query));
}

interface Attempt {
  key: string;
  digest: string;
  owner: KeyOwner;
}

@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  private readonly logger = new Logger('Idempotency');

  constructor(
    private readonly store: IdempotencyStore,
    private readonly seal: ResponseSeal,
    private readonly config: AppConfig,
  ) {}

  intercept(ctx: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (ctx.getType() !== 'http') return next.handle();
    const req = ctx.switchToHttp().getRequest<FastifyRequest>();
    const header = req.headers['idempotency-key'];
    // Without a caller (the bootstrap POST /keys) there is no owner to keep a response for: a
    // kept root admin key would go to anyone who sent the same header.
    if (header === undefined || !req.principal) return next.handle();
    return from(this.run(req, req.principal, ctx.switchToHttp().getResponse<FastifyReply>(), header, next));
  }

  private async run(req: FastifyRequest, principal: Principal, res: FastifyReply, header: string | string[], next: CallHandler): Promise<unknown> {
    const key = parseIdempotencyKey(header);
    const attempt: Attempt = { key, digest: keyDigest(key), owner: ownerOf(principal) };
    const fingerprint = requestFingerprint(req.method, routedUrl(req), req.body, tokenScopesOf(principal));
    const deadline = Date.now() + WAIT_MS;
    for (let poll = FIRST_POLL_MS; ; poll = Math.min(poll * 2, MAX_POLL_MS)) {
      const claim = await this.store.claim(attempt.owner, attempt.digest, fingerprint);
      if (claim) return this.execute(attempt, claim, res, next);
      const row = await this.store.find(attempt.owner, attempt.digest);
      if (row && row.fingerprint !== fingerprint) {
        throw keyConflict(key, 'This Idempotency-Key was already used with a different request (method, path, body or token scopes)');
      }
      if (row?.state === 'completed') return this.replay(attempt, row, res);
      // Applied, and its request is gone (or its response could not be kept): never run it again.
      if (row?.state === 'applied' && (row.abandoned || Date.now() >= deadline)) {
        throw keyConflict(key, 'The request with this Idempotency-Key was applied, but its response was not kept; read the outcome back instead of retrying');
      }
      if (Date.now() >= deadline) throw keyConflict(key, 'A request with this Idempotency-Key is still in progress; retry later', 1);
      if (row) await sleep(poll); // in progress: wait; gone (released or expired): claim again at once
    }
  }

  private async execute(attempt: Attempt, claim: Claim, res: FastifyReply, next: CallHandler): Promise<unknown> {
    const renewal = setInterval(() => {
      this.store.renew(attempt.owner, attempt.digest, claim).catch((err: unknown) => this.logger.warn({ err }, 'idempotency claim could not be renewed'));
    }, (this.config.IDEMPOTENCY_LEASE_SECONDS * 1000) / 3).unref();
    try {
      return await this.executeClaimed(attempt, claim, res, next);
    } finally {
      clearInterval(renewal);
    }
  }

  private async executeClaimed(attempt: Attempt, claim: Claim, res: FastifyReply, next: CallHandler): Promise<unknown> {
    let body: unknown;
    try {
      // The work's transaction marks the claim applied as it commits (claim-applied.ts).
      const pending = { owner: attempt.owner, keyHash: attempt.digest, claim, marked: false };
      body = await pendingClaim.run(pending, () => lastValueFrom(next.handle(), { defaultValue: undefined }));
    } catch (err) {
      const error = toApiError(err, undefined);
      // The filter sends exactly this envelope with this status for the error.
      await (keeps(error.status) && !isWriteCollision(err) && retryAfterOf(error) === undefined
        ? this.keep(attempt, claim, error.status, error.toEnvelope(), null)
        : this.releaseEventually(attempt, claim)
      ).catch((storeErr: unknown) => this.logger.error({ err: storeErr }, 'idempotency key could not be finished'));
      throw err;
    }
    try {
      // Nest set the route's status before the interceptors ran; a handler may have changed it since.
      if (body instanceof StreamableFile || !keeps(res.statusCode)) await this.releaseEventually(attempt, claim);
      else await this.keep(attempt, claim, res.statusCode, body, (res.getHeader('Location') as string | undefined) ?? null);
    } catch (err) {
      // The work is done, so its response still goes out. The claim stays applied: retries get
      // 409 rather than running the work again.
      this.logger.error({ err }, 'idempotency key could not be completed');
    }
    return body;
  }

  /**
   * Gives the claim up. A request that failed because the database went away usually cannot
   * release its claim either, and its retry would then wait out the claim's lease for nothing:
   * the release is tried again in the background, backing off up to 5 s, until the database
   * takes it or the lease would have run out anyway. It deletes this claim only, so a
   * late release cannot touch a retry's own.
   */
  private async releaseEventually(attempt: Attempt, claim: Claim): Promise<void> {
    try {
      await this.store.release(attempt.owner, attempt.digest, claim);
    } catch (err) {
      if (!isDependencyUnavailable(err)) throw err;
      const giveUpAt = Date.now() + this.config.IDEMPOTENCY_LEASE_SECONDS * 1000;
      const retry = (delay: number) =>
        setTimeout(() => {
          this.store.release(attempt.owner, attempt.digest, claim).catch(() => {
            if (Date.now() < giveUpAt) retry(Math.min(delay * 2, 5000));
          });
        }, delay).unref();
      retry(250);
    }
  }

  /**
   * Keeps the response as it is sent (JSON text). For POST /keys that includes the
   * plaintext `key` (and for POST /webhooks the `secret`): Stripe replays those too, so a client
   * whose first response was lost still gets its key. They are stored sealed (response-seal.ts).
   */
  private async keep(attempt: Attempt, claim: Claim, status: number, body: unknown, location: string | null): Promise<void> {
    const json = body === undefined ? '' : JSON.stringify(body);
    const sealed = await this.seal.seal(attempt.key, attempt.owner, attempt.digest, status, json ?? '');
    await this.store.complete(attempt.owner, attempt.digest, claim, status, sealed, location);
  }

  private async replay(attempt: Attempt, row: StoredKey, res: FastifyReply): Promise<unknown> {
    const status = row.responseStatus as number;
    const json = await this.seal.open(attempt.key, attempt.owner, attempt.digest, status, row.responseBody as Buffer).catch(() => {
      // Sealed under an encryption key the service no longer holds (a rotation whose
      // SVC_ENCRYPTION_KEY_PREVIOUS went before the row expired): the request is not run again,
      // and the client learns how it ended, which is all that is left of its answer.
      throw ApiError.conflict(
        'conflict',
        'The response kept for this Idempotency-Key can no longer be read (it was sealed under an encryption key the service no longer holds); ' +
          'the request it answered is not run again: use a new key to repeat it',
        { original_status: status, ...(row.responseLocation ? { location: row.responseLocation } : {}) },
      );
    });
    res.status(status);
    if (row.responseLocation) res.header('Location', row.responseLocation);
    res.header(IDEMPOTENT_REPLAYED_HEADER, 'true');
    return json === '' ? undefined : JSON.parse(json);
  }
}
