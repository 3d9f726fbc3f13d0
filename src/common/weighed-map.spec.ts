import { WeighedMap } from './weighed-map';

describe('WeighedMap', () => {
  it('drops the oldest entries past its count or its bytes, touch making one the newest', () => {
    const m = new WeighedMap<string, number>(3, 100);
    m.set('a', 1, 40);
    m.set('b', 2, 40);
    expect(m.touch('a')).toBe(1);
    m.set('c', 3, 40); // 120 bytes: b, now the oldest, goes
    expect([...m].map(([k]) => k)).toEqual(['a', 'c']);
    expect(m.bytes).toBe(80);
    m.reweigh('c', 70); // 110 bytes: a goes
    expect([[...m].map(([k]) => k), m.bytes]).toEqual([['c'], 70]);
    m.set('d', 4, 1);
    m.set('e', 5, 1);
    m.set('f', 6, 1); // four entries: c goes
    expect([[...m].map(([k]) => k), m.bytes]).toEqual([['d', 'e', 'f'], 3]);
    expect([m.delete('e'), m.delete('e'), m.size, m.bytes]).toEqual([true, false, 2, 2]);
  });
});
