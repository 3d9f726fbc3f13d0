import { thrownApiError } from '../../test/support/thrown';
import { ApiError } from '../common/api-error';
import { LIFECYCLE_TABLE } from '../../test/support/lifecycle-table';
import { assertInitialState, assertTransition, canTransition, INITIAL_STATES, STATES } from './lifecycle';

const TABLE = LIFECYCLE_TABLE;

describe('item lifecycle', () => {
  it('the table covers all 16 pairs of the four states', () => {
    expect(STATES).toEqual(['active', 'archived', 'trashed', 'revoked']);
    const pairs = new Set(TABLE.map(([f, t]) => `${f}>${t}`));
    expect(pairs.size).toBe(16);
  });

  it.each(TABLE)('canTransition(%s, %s) is %s', (from, to, allowed) => {
    expect(canTransition({ state: from }, to)).toBe(allowed);
  });

  it('a trashed item goes back to active unless it was revoked before: then it stays in the trash until purged', () => {
    expect(canTransition({ state: 'trashed', trashed_from: 'archived' }, 'active')).toBe(true);
    expect(canTransition({ state: 'trashed', trashed_from: 'revoked' }, 'active')).toBe(false);
    expect(canTransition({ state: 'trashed', trashed_from: 'revoked' }, 'trashed')).toBe(true);
    const err = thrownApiError(() => assertTransition({ state: 'trashed', trashed_from: 'revoked' }, 'active'));
    expect([err?.status, err?.code, err?.details]).toEqual([400, 'invalid_transition', { from: 'trashed', to: 'active' }]);
  });

  it.each(TABLE)('assertTransition(%s, %s): allowed=%s, otherwise 400 invalid_transition', (from, to, allowed) => {
    const err = thrownApiError(() => assertTransition({ state: from }, to));
    if (allowed) {
      expect(err).toBeUndefined();
    } else {
      expect(err).toBeInstanceOf(ApiError);
      expect(err!.status).toBe(400);
      expect(err!.code).toBe('invalid_transition');
      expect(err!.details).toEqual({ from, to });
    }
  });

  it('new items start active or archived only', () => {
    expect([...INITIAL_STATES].sort()).toEqual(['active', 'archived']);
    expect(thrownApiError(() => assertInitialState('active'))).toBeUndefined();
    expect(thrownApiError(() => assertInitialState('archived'))).toBeUndefined();
    for (const state of ['trashed', 'revoked'] as const) {
      const err = thrownApiError(() => assertInitialState(state));
      expect(err?.status).toBe(400);
      expect(err?.code).toBe('invalid_transition');
      expect(err?.details).toEqual({ from: null, to: state });
    }
  });
});
