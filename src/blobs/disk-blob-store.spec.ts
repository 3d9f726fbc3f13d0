import { createHash, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { text } from 'node:stream/consumers';
import { BlobContentMissing } from './blob-store';
import { DiskBlobStore } from './disk-blob-store';

describe('DiskBlobStore', () => {
  let root: string;
  let store: DiskBlobStore;
  const tenant = randomUUID();
  const content = 'hello blobs';
  const hash = createHash('sha256').update(content).digest('hex');

  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'disk-blob-store-'));
    store = new DiskBlobStore(root);
  });
  afterEach(() => rm(root, { recursive: true, force: true }));

  async function staged(): Promise<string> {
    const file = join(root, `staged-${randomUUID()}`);
    await writeFile(file, content);
    return file;
  }

  it('moves a staged file to <root>/<tenant>/<hash[0:2]>/<hash>', async () => {
    const file = await staged();
    await store.put(tenant, hash, file);
    expect(existsSync(file)).toBe(false);
    expect(await readFile(join(root, tenant, hash.slice(0, 2), hash), 'utf8')).toBe(content);
    expect(await store.has(tenant, hash)).toBe(true);
    expect(await text(await store.open(tenant, hash))).toBe(content);
  });

  it('writing the same address twice keeps one file', async () => {
    await store.put(tenant, hash, await staged());
    await store.put(tenant, hash, await staged());
    expect(await text(await store.open(tenant, hash))).toBe(content);
  });

  it('reports missing content, and removes idempotently', async () => {
    expect(await store.has(tenant, hash)).toBe(false);
    await expect(store.open(tenant, hash)).rejects.toBeInstanceOf(BlobContentMissing);
    await store.put(tenant, hash, await staged());
    await store.remove(tenant, hash);
    await store.remove(tenant, hash);
    expect(await store.has(tenant, hash)).toBe(false);
  });

  it('refuses addresses that are not a uuid and a sha256 hex', () => {
    expect(() => store.path('../etc', hash)).toThrow();
    expect(() => store.path(tenant, '../../passwd')).toThrow();
    expect(() => store.path(tenant, hash.toUpperCase())).toThrow();
  });
});
