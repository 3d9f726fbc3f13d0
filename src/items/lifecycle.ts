/**
 * The item lifecycle: every allowed move between states, in one table. Anything absent is
 * 400 `invalid_transition`. Staying in the same state is not a move and is always allowed.
 *
 *   from \ to   active   archived   trashed   revoked
 *   active        -         yes        yes       yes
 *   archived     yes         -         yes       yes
 *   trashed      yes      NO (SPEC)     -        no
 *   revoked       no         no        yes        -
 *
 * Why: trash is a waste-basket, so its only ways out are restore (to active) and purge; a
 * revoked item (a withdrawn consent, a cancelled credential) is final apart from being thrown
 * away, so it cannot be quietly revived, not even through the trash: a trashed item remembers
 * the state it was trashed from (`trashed_from`), and one trashed from revoked is not restored.
 * New items start `active` or `archived`.
 */
import { ApiError } from '../common/api-error';

export const STATES = ['active', 'archived', 'trashed', 'revoked'] as const;
export type ItemState = (typeof STATES)[number];
export const INITIAL_STATES: readonly ItemState[] = ['active', 'archived'];

const ALLOWED: Record<ItemState, readonly ItemState[]> = {
  active: ['archived', 'trashed', 'revoked'],
  archived: ['active', 'trashed', 'revoked'],
  trashed: ['active'],
  revoked: ['trashed'],
};

/** The item's state, and for a trashed one the state it was trashed from (`items.trashed_from`). */
export interface Lifecycle {
  state: ItemState;
  trashed_from?: ItemState | null;
}

/** Whether the item may move to `to`. Out of the trash only back to active, and not when it was revoked before. */
export function canTransition(item: Lifecycle, to: ItemState): boolean {
  if (item.state === to) return true;
  if (item.state === 'trashed' && item.trashed_from === 'revoked') return false;
  return ALLOWED[item.state].includes(to);
}

export function assertTransition(item: Lifecycle, to: ItemState): void {
  if (!canTransition(item, to)) throw transitionError(item, to);
}

export function transitionError(item: Lifecycle, to: ItemState): ApiError {
  const message =
    item.state === 'trashed' && item.trashed_from === 'revoked'
      ? 'The item was revoked before it was trashed: a revoked item stays revoked, so it can only be purged'
      : `An item cannot move from ${item.state} to ${to}`;
  return ApiError.badRequest('invalid_transition', message, { from: item.state, to });
}

export function assertInitialState(state: ItemState): void {
  if (!INITIAL_STATES.includes(state)) {
    throw ApiError.badRequest('invalid_transition', `A new item cannot start ${state}; it starts active or archived`, { from: null, to: state });
  }
}
