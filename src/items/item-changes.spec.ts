import { blobReferences } from './item-changes';

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
