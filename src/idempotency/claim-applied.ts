/**
 * Marks an idempotency claim `applied` in the transaction that commits its request's work, so
 * that the work and the mark commit together or not at all (Stripe-style atomic phases). The
 * response is kept afterwards (idempotency.store.ts `complete`); should the instance die in
 * between, or that write fail, a retry finds the key applied and is refused, never run again.
 *
 * The interceptor runs the handler inside `pendingClaim.run`; every TypeORM transaction that
 * commits within it (the request's own, and only those: others run outside that context) passes
 * here just before its COMMIT, and the first one marks the claim. So an idempotent route
 * commits its work in its first transaction (each does: one transaction per request), and a
 * write that commits outside a TypeORM transaction would not be covered.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { EntitySubscriberInterface, EventSubscriber, TransactionCommitEvent } from 'typeorm';
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
    await markApplied((sql, params) => event.queryRunner.query(sql, params), pending.owner, pending.keyHash, pending.claim);
    pending.marked = true;
  }
}
