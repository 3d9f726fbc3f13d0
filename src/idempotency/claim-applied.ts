/**
 * Marks an idempotency claim `applied` in the transaction that commits its request's work, so
 * that the work and the mark commit together or not at all (Stripe-style atomic phases). The
 * response is kept afterwards (idempotency.store.ts `complete`); should the instance die in
 * between, or that write fail, a retry finds the key applied and is refused, never run again.
 * A claim that is no longer the request's (a retry took it over once its lease lapsed) fails
 * the commit instead: the retry runs the work, this request must not.
 *
 * The interceptor runs the handler inside `pendingClaim.run`; every TypeORM transaction that
 * commits within it (the request's own, and only those: others run outside that context) passes
 * here just before its COMMIT, and the first one marks the claim. So an idempotent route
 * commits its work in its first transaction (each does: one transaction per request), and a
 * write that commits outside a TypeORM transaction would not be covered.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { EntitySubscriberInterface, EventSubscriber, TransactionCommitEvent } from 'typeorm';
import { ApiError } from '../common/api-error';
import type { KeyOwner } from './idempotency-key';
import { Claim, markApplied } from './idempotency.store';

export interface PendingClaim {
  owner: KeyOwner;
  keyHash: string;
  /** The claim's identity, so a claim taken over is never marked by its first holder. */
  claim: Claim;
  marked: boolean;
}

export const pendingClaim = new AsyncLocalStorage<PendingClaim>();

@EventSubscriber()
export class ClaimAppliedSubscriber implements EntitySubscriberInterface {
  async beforeTransactionCommit(event: TransactionCommitEvent): Promise<void> {
    const pending = pendingClaim.getStore();
    if (!pending || pending.marked) return;
    if (!(await markApplied((sql, params) => event.queryRunner.query(sql, params), pending.owner, pending.keyHash, pending.claim))) {
      throw new ApiError(409, 'conflict', 'A retry with this Idempotency-Key took the request over after its claim lapsed; this request changed nothing');
    }
    pending.marked = true;
  }
}
