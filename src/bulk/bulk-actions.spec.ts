import { thrownApiError } from '../../test/support/thrown';
import { LIFECYCLE_TABLE } from '../../test/support/lifecycle-table';
import { ApiError } from '../common/api-error';
import type { ItemRow } from '../items/item.model';
import type { ResolvedType } from '../types/types.service';
import { validatorFor } from '../types/property-validation';
import { planChange, specOf } from './bulk-actions';

const row = (over: Partial<ItemRow> = {}): ItemRow => ({
  tenant_id: 't', id: 'i', type: 'core.task', properties: { title: 'a', priority: 1 }, state: 'active', version: 1, schema_version: 1,
  source: 's', source_id: null, timestamp: new Date('2026-01-01T00:00:00Z'), tier: 'library', device: null, capture_latitude: null,
  capture_longitude: null, tags: ['x'], extensions: {}, created_at: new Date(), updated_at: new Date(), trashed_from: null, ...over,
});

const schema = {
  type: 'object',
  properties: { title: { type: 'string' }, priority: { type: 'integer', minimum: 0, maximum: 5 } },
  required: ['title'],
} as const;
const taskType: ResolvedType = { name: 'core.task', version: 3, schema, mergePolicy: {}, validate: validatorFor('bulk-spec:task', schema as never) };

const fields = (err: ApiError | undefined) => (err?.details?.fields as Array<{ field: string }>).map((f) => f.field).sort();

describe('specOf: the per-action fields', () => {
  it('keeps only the action\'s own fields and defaults emit_events to true', () => {
    expect(specOf({ action: 'transition', to_state: 'archived' })).toEqual({ action: 'transition', emit_events: true, to_state: 'archived' });
    expect(specOf({ action: 'purge', confirm: 'PURGE', emit_events: false })).toEqual({ action: 'purge', emit_events: false });
    expect(specOf({ action: 'update_tags', remove_tags: ['a'] })).toEqual({ action: 'update_tags', emit_events: true, remove_tags: ['a'] });
  });

  it('names every missing, foreign or wrong field in one validation_error', async () => {
    const err = thrownApiError(() => specOf({ action: 'transition', tier: 'feed', confirm: 'PURGE' }));
    expect(err?.code).toBe('validation_error');
    expect(fields(err)).toEqual(['confirm', 'tier', 'to_state']);
    expect(fields(thrownApiError(() => specOf({ action: 'update_tags' })))).toEqual(['add_tags', 'remove_tags']);
    expect(fields(thrownApiError(() => specOf({ action: 'purge', confirm: 'purge' })))).toEqual(['confirm']);
    expect(fields(thrownApiError(() => specOf({ action: 'purge' })))).toEqual(['confirm']);
    expect(fields(thrownApiError(() => specOf({ action: 'update_properties', properties: {} })))).toEqual(['properties']);
  });
});

describe('planChange: one action on one item', () => {
  it.each(LIFECYCLE_TABLE)('transition %s → %s follows the lifecycle table (allowed: %s)', async (from, to, allowed) => {
    const plan = await planChange({ action: 'transition', emit_events: true, to_state: to }, row({ state: from }));
    if (from === to) expect(plan).toBe('unchanged');
    else if (allowed) expect(plan).toEqual({ changes: { state: to } });
    else expect(plan).toMatchObject({ code: 'invalid_transition' });
  });

  it('update_tags adds once, removes after adding, and leaves an unchanged item alone', async () => {
    const spec = { action: 'update_tags', emit_events: true } as const;
    expect(await planChange({ ...spec, add_tags: ['y', 'x'] }, row())).toEqual({ changes: { tags: ['x', 'y'] } });
    expect(await planChange({ ...spec, add_tags: ['z'], remove_tags: ['x', 'z'] }, row())).toEqual({ changes: { tags: [] } });
    expect(await planChange({ ...spec, add_tags: ['x'] }, row())).toBe('unchanged');
  });

  it('update_tier and update_timestamp change only what differs', async () => {
    expect(await planChange({ action: 'update_tier', emit_events: true, tier: 'library' }, row())).toBe('unchanged');
    expect(await planChange({ action: 'update_tier', emit_events: true, tier: 'feed' }, row())).toEqual({ changes: { tier: 'feed' } });
    expect(await planChange({ action: 'update_timestamp', emit_events: true, timestamp: '2026-01-01T01:00:00+01:00' }, row())).toBe('unchanged');
    expect(await planChange({ action: 'update_timestamp', emit_events: true, timestamp: '2026-02-01T00:00:00Z' }, row())).toEqual({
      changes: { timestamp: new Date('2026-02-01T00:00:00Z') },
    });
  });

  it('update_properties merges shallowly and checks the result against the type', async () => {
    const spec = { action: 'update_properties', emit_events: true } as const;
    expect(await planChange({ ...spec, properties: { priority: 2, title: null } as never }, row(), taskType)).toMatchObject({ code: 'missing_required_field' });
    expect(await planChange({ ...spec, properties: { priority: 9 } }, row(), taskType)).toMatchObject({ code: 'invalid_properties' });
    expect(await planChange({ ...spec, properties: { priority: 1 } }, row(), taskType)).toBe('unchanged');
    expect(await planChange({ ...spec, properties: { priority: 4 } }, row(), taskType)).toEqual({
      changes: { properties: { title: 'a', priority: 4 }, schema_version: 3 },
    });
    expect(await planChange({ ...spec, properties: { priority: 4 } }, row(), undefined)).toMatchObject({ code: 'invalid_type' });
  });
});

describe('update_tags past the tag limit', () => {
  it('is that item\'s validation_error, while removing from an over-full item is fine', async () => {
    const full = row({ tags: Array.from({ length: 100 }, (_, i) => `t${i}`) });
    expect(await planChange({ action: 'update_tags', emit_events: true, add_tags: ['one-more'] }, full)).toMatchObject({ code: 'validation_error' });
    expect(await planChange({ action: 'update_tags', emit_events: true, remove_tags: ['t0'] }, full)).toMatchObject({ changes: { tags: expect.any(Array) } });
  });
});
