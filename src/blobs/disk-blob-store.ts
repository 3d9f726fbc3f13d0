/**
 * Blob content as files: `<root>/<tenantId>/<hash[0:2]>/<hash>`. A staged upload is moved
 * into place with rename(2), so a reader sees the whole file or none; the staging directory
 * sits under the same root (see BlobsService) so that rename never crosses file systems.
 *
 * Several instances can share the root only through a shared volume; deployments with more
 * than one machine should prefer BLOB_STORAGE=postgres (or a future S3-compatible store).
 */
import { constants } from 'node:fs';
import { copyFile, mkdir, open, rename, rm, stat } from 'node:fs/promises';
import { randomUUID } from 'node:crypto';
import { dirname, join, resolve } from 'node:path';
import type { Readable } from 'node:stream';
import { isId } from '../common/ids';
import { BLOB_HASH_RE } from './blob-hash';
import { BlobContentMissing, BlobStore } from './blob-store';
import type { ByteRange } from './byte-range';

const READ_CHUNK = 256 * 1024;

export class DiskBlobStore implements BlobStore {
  readonly root: string;

  constructor(root: string) {
    this.root = resolve(root);
  }

  /** Where a blob's file lives. Both parts are checked, so no input can leave the root. */
  path(tenantId: string, hash: string): string {
    if (!isId(tenantId) || !BLOB_HASH_RE.test(hash)) throw new Error('invalid blob address');
    return join(this.root, tenantId.toLowerCase(), hash.slice(0, 2), hash);
  }

  async put(tenantId: string, hash: string, file: string): Promise<void> {
    const target = this.path(tenantId, hash);
    const dir = dirname(target);
    await mkdir(dir, { recursive: true });
    try {
      // Replacing an existing file is harmless: same address, same bytes.
      await rename(file, target);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err;
      // Staging on another file system after all: copy beside the target, then rename.
      const tmp = join(dir, `.${hash}.${randomUUID()}.tmp`);
      try {
        await copyFile(file, tmp, constants.COPYFILE_FICLONE);
        await rename(tmp, target);
      } finally {
        await rm(tmp, { force: true });
      }
    }
    await syncDir(dir);
  }

  async open(tenantId: string, hash: string, range?: ByteRange): Promise<Readable> {
    let handle;
    try {
      handle = await open(this.path(tenantId, hash), 'r');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new BlobContentMissing(tenantId, hash);
      throw err;
    }
    // The descriptor is open before the caller sends headers; the stream closes it.
    return handle.createReadStream({ highWaterMark: READ_CHUNK, start: range?.start, end: range?.end });
  }

  async has(tenantId: string, hash: string): Promise<boolean> {
    try {
      return (await stat(this.path(tenantId, hash))).isFile();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw err;
    }
  }

  async remove(tenantId: string, hash: string): Promise<void> {
    await rm(this.path(tenantId, hash), { force: true });
  }

  /** The tenant's directory with its hash-prefix directories, which removing each file leaves. */
  async removeTenant(tenantId: string): Promise<void> {
    if (!isId(tenantId)) throw new Error('invalid blob address');
    await rm(join(this.root, tenantId.toLowerCase()), { recursive: true, force: true });
  }
}

/** Makes a rename durable: the directory entry is on disk once this returns. */
async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } catch {
    // Some file systems do not sync directories; the data file itself was synced when staged.
  } finally {
    await handle.close();
  }
}
