import { ConfigError, loadConfig } from '../config/app-config';

describe('blob settings', () => {
  it('defaults: 25 MiB, disk storage under ./data/blobs', () => {
    const c = loadConfig({});
    expect(c.BLOB_MAX_BYTES).toBe(25 * 1024 * 1024);
    expect(c.BLOB_STORAGE).toBe('disk');
    expect(c.BLOB_DIR).toBe('./data/blobs');
  });

  it('reads the environment', () => {
    const c = loadConfig({ BLOB_MAX_BYTES: '1024', BLOB_STORAGE: 'postgres', BLOB_DIR: '/var/lib/svc/blobs' });
    expect(c.BLOB_MAX_BYTES).toBe(1024);
    expect(c.BLOB_STORAGE).toBe('postgres');
    expect(c.BLOB_DIR).toBe('/var/lib/svc/blobs');
  });

  it.each([
    ['BLOB_MAX_BYTES', '25mb'],
    ['BLOB_MAX_BYTES', '0'],
    ['BLOB_STORAGE', 's3'],
  ])('rejects %s=%s naming the variable', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(name);
  });
});
