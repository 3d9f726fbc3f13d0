/**
 * The item lifecycle as the tests expect it, written out independently of
 * src/items/lifecycle.ts: [from, to, allowed]. Same-state is an allowed no-op; trashed →
 * archived is SPEC 3.1's always-rejected move. Shared by the unit and the e2e spec.
 */
export type State = 'active' | 'archived' | 'trashed' | 'revoked';

export const LIFECYCLE_TABLE: Array<[State, State, boolean]> = [
  ['active', 'active', true],
  ['active', 'archived', true],
  ['active', 'trashed', true],
  ['active', 'revoked', true],
  ['archived', 'active', true],
  ['archived', 'archived', true],
  ['archived', 'trashed', true],
  ['archived', 'revoked', true],
  ['trashed', 'active', true],
  ['trashed', 'archived', false],
  ['trashed', 'trashed', true],
  ['trashed', 'revoked', false],
  ['revoked', 'active', false],
  ['revoked', 'archived', false],
  ['revoked', 'trashed', true],
  ['revoked', 'revoked', true],
];
