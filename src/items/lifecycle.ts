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
 * away, so it cannot be quietly revived. New items start `active` or `archived`.
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

export function canTransition(from: ItemState, to: ItemState): boolean {
  return from === to || ALLOWED[from].includes(to);
}

export function assertTransition(from: ItemState, to: ItemState): void {
  if (!canTransition(from, to)) {
    throw ApiError.badRequest('invalid_transition', `An item cannot move from ${from} to ${to}`, { from, to });
  }
}

export function assertInitialState(state: ItemState): void {
  if (!INITIAL_STATES.includes(state)) {
    throw ApiError.badRequest('invalid_transition', `A new item cannot start ${state}; it starts active or archived`, { from: null, to: state });
  }
}
