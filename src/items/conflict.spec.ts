import { AUTO_MERGED, conflictingFields, mergeTags, onlyAutoMerged, touchedFields } from './conflict';
import type { ItemRow } from './item.model';

function row(over: Partial<ItemRow> = {}): ItemRow {
  return {
    tenant_id: 't1',
    id: 'i1',
    type: 'core.note',
    properties: { title: 'a', body: 'b' },
    state: 'active',
    version: 1,
    schema_version: 1,
    source: 'src',
    source_id: null,
    timestamp: new Date('2024-01-01T00:00:00.000Z'),
    tier: 'library',
    device: null,
    capture_latitude: null,
    capture_longitude: null,
    tags: ['a', 'b'],
    extensions: {},
    created_at: new Date('2024-01-01T00:00:00.000Z'),
    updated_at: new Date('2024-01-01T00:00:00.000Z'),
    trashed_from: null,
    ...over,
  };
}

describe('conflict rules', () => {
  describe('mergeTags (three-way: client adds/removes relative to the ancestor, applied to current)', () => {
    it('keeps a tag someone else added while the client removed another', () => {
      // v1 [a,b]; someone made it [a,b,c]; the stale client sends [a] (removes b).
      expect(mergeTags(['a', 'b'], ['a'], ['a', 'b', 'c'])).toEqual(['a', 'c']);
    });

    it('applies the client additions on top of current', () => {
      expect(mergeTags(['a'], ['a', 'x'], ['a', 'y'])).toEqual(['a', 'y', 'x']);
    });

    it('does not duplicate a tag both sides added', () => {
      expect(mergeTags(['a'], ['a', 'x'], ['a', 'x'])).toEqual(['a', 'x']);
    });

    it('a removal of a tag already removed by someone else is harmless', () => {
      expect(mergeTags(['a', 'b'], ['a'], ['a'])).toEqual(['a']);
    });

    it('does not resurrect a tag someone else removed when the client left it untouched', () => {
      expect(mergeTags(['a', 'b'], ['a', 'b', 'n'], ['a'])).toEqual(['a', 'n']);
    });

    it('unchanged client tags leave current as is', () => {
      expect(mergeTags(['a', 'b'], ['a', 'b'], ['b', 'z'])).toEqual(['b', 'z']);
    });

    it('empty client list removes every ancestor tag but keeps the others', () => {
      expect(mergeTags(['a', 'b'], [], ['a', 'b', 'c'])).toEqual(['c']);
    });
  });

  describe('touchedFields', () => {
    it('expands properties and extensions into one path per key', () => {
      expect(touchedFields({ properties: { title: 'x', body: null }, extensions: { acme: { a: 1 } } }).sort()).toEqual(
        ['extensions.acme', 'properties.body', 'properties.title'].sort(),
      );
    });

    it('names the other fields as they are and skips undefined ones', () => {
      expect(touchedFields({ tags: [], tier: 'feed', state: undefined, timestamp: '2024-01-01T00:00:00Z' }).sort()).toEqual(
        ['tags', 'tier', 'timestamp'].sort(),
      );
    });

    it('null device/coordinates count as touched (they clear the field)', () => {
      expect(touchedFields({ device: null, capture_latitude: null }).sort()).toEqual(['capture_latitude', 'device']);
    });

    it('an empty patch or empty properties object touches nothing', () => {
      expect(touchedFields({})).toEqual([]);
      expect(touchedFields({ properties: {} })).toEqual([]);
    });
  });

  describe('conflictingFields', () => {
    const ancestor = row();

    it('lists only touched fields that changed on the server since the ancestor', () => {
      const current = row({ version: 2, properties: { title: 'server', body: 'b' } });
      expect(conflictingFields(['properties.title', 'properties.body'], ancestor, current)).toEqual(['properties.title']);
    });

    it('is empty when the server changed only untouched fields', () => {
      const current = row({ version: 2, properties: { title: 'a', body: 'server' }, tags: ['z'] });
      expect(conflictingFields(['properties.title'], ancestor, current)).toEqual([]);
    });

    it('sees added and removed property keys', () => {
      const current = row({ properties: { title: 'a', extra: 1 } });
      expect(conflictingFields(['properties.extra', 'properties.body', 'properties.title'], ancestor, current)).toEqual([
        'properties.extra',
        'properties.body',
      ]);
    });

    it('compares nested values deeply, and extensions per namespace', () => {
      const a = row({ extensions: { acme: { n: { x: 1 } }, other: { y: 1 } } });
      const same = row({ extensions: { acme: { n: { x: 1 } }, other: { y: 2 } } });
      const diff = row({ extensions: { acme: { n: { x: 2 } }, other: { y: 1 } } });
      expect(conflictingFields(['extensions.acme'], a, same)).toEqual([]);
      expect(conflictingFields(['extensions.acme'], a, diff)).toEqual(['extensions.acme']);
    });

    it('compares timestamps by instant whether stored as Date or as JSON string (snapshots)', () => {
      const snapshot = JSON.parse(JSON.stringify(row())) as ItemRow; // how item_versions gives it back
      expect(conflictingFields(['timestamp'], snapshot, row())).toEqual([]);
      expect(conflictingFields(['timestamp'], snapshot, row({ timestamp: new Date('2025-01-01T00:00:00.000Z') }))).toEqual(['timestamp']);
    });

    it('compares top-level fields such as tags, tier and state', () => {
      const current = row({ tags: ['a'], tier: 'feed', state: 'active' });
      expect(conflictingFields(['tags', 'tier', 'state'], ancestor, current)).toEqual(['tags', 'tier']);
    });
  });

  describe('onlyAutoMerged', () => {
    it('auto-merged fields are exactly tags, tier and state', () => {
      expect([...AUTO_MERGED].sort()).toEqual(['state', 'tags', 'tier']);
    });

    it('is true only when every touched field is auto-merged', () => {
      expect(onlyAutoMerged(['tags'])).toBe(true);
      expect(onlyAutoMerged(['tags', 'tier', 'state'])).toBe(true);
      expect(onlyAutoMerged(['tags', 'properties.title'])).toBe(false);
      expect(onlyAutoMerged(['timestamp'])).toBe(false);
      expect(onlyAutoMerged(['extensions.acme'])).toBe(false);
    });

    it('is false for nothing touched', () => {
      expect(onlyAutoMerged([])).toBe(false);
    });
  });
});
