import { blobReferences, nextValues } from './item-changes';
import type { ItemRow } from './item.model';

describe('blobReferences', () => {
  const ref = (c: string) => `sha256:${c.repeat(64)}`;

  it('finds references at any depth, in arrays too, with dotted paths', () => {
    const properties = { title: 'x', cover: ref('a'), pages: [{ scan: ref('b') }, 'text', [ref('c')]], meta: { deep: { file: ref('d') } } };
    expect(blobReferences(properties)).toEqual([
      { path: 'cover', ref: ref('a') },
      { path: 'pages.0.scan', ref: ref('b') },
      { path: 'pages.2.0', ref: ref('c') },
      { path: 'meta.deep.file', ref: ref('d') },
    ]);
  });

  it('takes only the exact form: lowercase hex, 64 digits, nothing around it', () => {
    expect(blobReferences({ a: ref('A'), b: `${ref('a')}0`, c: ` ${ref('a')}`, d: `sha256:${'a'.repeat(63)}`, e: 7, f: null })).toEqual([]);
  });
});

describe('nextValues', () => {
  const at = new Date('2024-01-01T00:00:00.000Z');
  const current: ItemRow = {
    tenant_id: 't1', id: 'i1', type: 'core.note', version: 4, source: 'src', source_id: null, created_at: at, updated_at: at, trashed_from: null,
    properties: { a: 1 }, tags: ['x'], tier: 'library', state: 'active', timestamp: at, device: 'phone',
    capture_latitude: 1, capture_longitude: 2, extensions: { app: { k: 1 }, other: { k: 2 } }, schema_version: 1,
  };

  it('keeps each field not sent, and takes the properties and schema version it is given', () => {
    expect(nextValues(current, {}, { properties: { b: 2 }, schema_version: 3 })).toEqual({
      properties: { b: 2 }, tags: ['x'], tier: 'library', state: 'active', timestamp: current.timestamp, device: 'phone',
      capture_latitude: 1, capture_longitude: 2, extensions: { app: { k: 1 }, other: { k: 2 } }, schema_version: 3,
    });
  });

  it('takes each field sent; null clears a nullable one, and an extension namespace', () => {
    const sent = { tags: ['y'], tier: 'feed' as const, state: 'archived' as const, timestamp: '2025-01-01T00:00:00.000Z', device: null, capture_latitude: null, capture_longitude: 5, extensions: { app: null } };
    expect(nextValues(current, sent, { properties: current.properties, schema_version: 1 })).toEqual({
      properties: { a: 1 }, tags: ['y'], tier: 'feed', state: 'archived', timestamp: '2025-01-01T00:00:00.000Z', device: null,
      capture_latitude: null, capture_longitude: 5, extensions: { other: { k: 2 } }, schema_version: 1,
    });
  });
});
