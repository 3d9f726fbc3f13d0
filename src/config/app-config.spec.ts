import Fastify from 'fastify';
import { ConfigError, loadConfig } from './app-config';

function configError(env: NodeJS.ProcessEnv): ConfigError {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('loadConfig', () => {
  it('applies the documented defaults to an empty environment', () => {
    const c = loadConfig({});
    expect(c.PORT).toBe(3000);
    expect(c.HOST).toBe('0.0.0.0');
    expect(c.DATABASE_URL).toBe('postgres://postgres@127.0.0.1:5432/svc');
    expect(c.REDIS_URL).toBe('redis://127.0.0.1:6379');
    expect(c.MIGRATIONS_RUN).toBe(true);
    expect(c.RATE_LIMIT_ENABLED).toBe(true);
    expect(c.RATE_LIMIT_REQUESTS).toBeGreaterThanOrEqual(1);
    expect(c.SVC_BASE_URL).toBeUndefined();
    expect(c.baseUrl).toBe('http://localhost:3000');
    expect(c.trustProxy).toBe(false);
    expect(c.isProduction).toBe(false);
    expect(c.SEARCH_DB_POOL_SIZE).toBe(4);
    expect(c.REQUEST_TIMEOUT_MS).toBe(300_000);
  });

  it('takes CORS_ORIGINS as *, none or a comma list of origins, refusing anything else naming it', () => {
    expect(loadConfig({}).corsOrigins).toBe('*');
    expect(loadConfig({ CORS_ORIGINS: 'none' }).corsOrigins).toEqual(new Set());
    expect(loadConfig({ CORS_ORIGINS: 'https://app.example.com, http://localhost:5173' }).corsOrigins).toEqual(new Set(['https://app.example.com', 'http://localhost:5173']));
    for (const bad of ['https://app.example.com/', 'https://app.example.com/path', 'app.example.com', 'ftp://app.example.com', 'https://APP.example.com', 'https://app.example.com:443', 'https://a.example,,https://b.example']) {
      expect([bad, configError({ CORS_ORIGINS: bad }).message]).toEqual([bad, expect.stringContaining('CORS_ORIGINS')]);
    }
  });

  it('treats empty strings as unset', () => {
    expect(loadConfig({ PORT: '', RATE_LIMIT_ENABLED: '' }).PORT).toBe(3000);
  });

  it('reads and converts values', () => {
    const c = loadConfig({
      PORT: '8080',
      MIGRATIONS_RUN: 'false',
      RATE_LIMIT_ENABLED: '0',
      RATE_LIMIT_REQUESTS: '42',
      SVC_BASE_URL: 'https://api.example.com/',
      TRUST_PROXY: 'true',
    });
    expect(c.PORT).toBe(8080);
    expect(c.MIGRATIONS_RUN).toBe(false);
    expect(c.RATE_LIMIT_ENABLED).toBe(false);
    expect(c.RATE_LIMIT_REQUESTS).toBe(42);
    expect(c.baseUrl).toBe('https://api.example.com');
    expect(c.trustProxy).toBe(true);
    expect(loadConfig({ PORT: '4000' }).baseUrl).toBe('http://localhost:4000');
    // A hop count trusts that many proxies nearest the service, and no further hop.
    const twoHops = loadConfig({ TRUST_PROXY: '2' }).trustProxy as (address: string, hop: number) => boolean;
    expect([0, 1, 2].map((hop) => twoHops('10.0.0.1', hop))).toEqual([true, true, false]);
    expect(loadConfig({ TRUST_PROXY: 'loopback, 10.0.0.0/8' }).trustProxy).toBe('loopback, 10.0.0.0/8');
  });

  it.each([
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['PORT', '-1'],
    ['DATABASE_URL', 'mysql://localhost/svc'],
    ['DATABASE_URL', 'postgres://localhost'],
    ['REDIS_URL', 'http://localhost:6379'],
    ['REDIS_URL', 'redis://localhost:6379/abc'],
    ['REDIS_URL', 'redis://localhost:6379/1.5'],
    ['REDIS_URL', 'redis://localhost:6379/?db=x'],
    ['RATE_LIMIT_ENABLED', 'maybe'],
    ['RATE_LIMIT_REQUESTS', '0'],
    ['MIGRATIONS_RUN', 'sometimes'],
    ['NODE_ENV', 'staging'],
    ['JSON_BODY_LIMIT', 'lots'],
    ['SEARCH_DB_POOL_SIZE', '0'],
    ['SEARCH_DB_POOL_SIZE', '101'],
    // A request must arrive in bounded time: 0 is not "no limit".
    ['REQUEST_TIMEOUT_MS', '0'],
    ['REQUEST_TIMEOUT_MS', '3600001'],
    // Values a pattern let through that then failed start-up with "Invalid URL" or
    // "invalid IP address", naming no variable.
    ['SVC_BASE_URL', 'http://a b'],
    ['DATABASE_URL', 'postgres://postgres:ab/cd@127.0.0.1:5432/x'],
    ['DATABASE_URL', 'postgres://postgres:a#b@127.0.0.1:5432/x'],
    ['TRUST_PROXY', 'garbage'],
    ['TRUST_PROXY', '10.0.0.0/33'],
  ])('%s=%p is a ConfigError naming the variable', (name, value) => {
    const err = configError({ [name]: value });
    expect(err.message).toContain(name);
    expect(err.message).not.toContain('\n');
  });

  // Each bounded so that no timer runs hot (0ms) or past Node's 2^31-1 ms, where it fires after
  // 1 ms instead; and no body limit refuses every body or none.
  it.each([
    ['WEBHOOK_SWEEP_INTERVAL', '0ms'],
    ['WEBHOOK_SWEEP_INTERVAL', '99ms'],
    ['WEBHOOK_SWEEP_INTERVAL', '61m'],
    ['WEBHOOK_SWEEP_INTERVAL', '35792m'],
    ['WEBHOOK_SWEEP_INTERVAL', '99999m'],
    ['WEBHOOK_SWEEP_INTERVAL', '1h'],
    ['BULK_JOB_LEASE', '0ms'],
    ['BULK_JOB_LEASE', '999ms'],
    ['BULK_JOB_LEASE', '61m'],
    ['BULK_JOB_LEASE', '99999m'],
    ['WEBHOOK_RETRY_SCHEDULE', '0ms'],
    ['WEBHOOK_RETRY_SCHEDULE', '30s,999ms'],
    ['WEBHOOK_RETRY_SCHEDULE', '30s,8d'],
    ['WEBHOOK_RETRY_SCHEDULE', '99999999d'],
    ['WEBHOOK_RETRY_SCHEDULE', '30s,'],
    ['WEBHOOK_RETRY_SCHEDULE', Array(21).fill('1s').join(',')],
    ['JSON_BODY_LIMIT', '0b'],
    ['JSON_BODY_LIMIT', '1023b'],
    ['JSON_BODY_LIMIT', '101mb'],
    ['JSON_BODY_LIMIT', '99999999999999999999mb'],
    ['JSON_BODY_LIMIT', '1gb'],
  ])('%s=%p, out of its documented range, is a ConfigError in one line naming it and the range', (name, value) => {
    const message = configError({ [name]: value }).message;
    expect(message).toMatch(new RegExp(`^invalid configuration: ${name}=".*" must be a (size|duration|comma list of 1-20 durations,?) .*from `));
    expect(message).not.toContain('\n');
  });

  it.each([
    ['WEBHOOK_SWEEP_INTERVAL', '100ms', 100],
    ['WEBHOOK_SWEEP_INTERVAL', '60m', 3_600_000],
    ['BULK_JOB_LEASE', '1s', 1000],
    ['BULK_JOB_LEASE', '1000ms', 1000],
    ['BULK_JOB_LEASE', '60m', 3_600_000],
  ])('%s=%p, an end of its range, is accepted', (name, value, ms) => {
    const c = loadConfig({ [name]: value });
    expect(name === 'BULK_JOB_LEASE' ? c.bulkJobLeaseMs : c.webhookSweepIntervalMs).toBe(ms);
  });

  it('accepts the duration and size defaults and the ends of their ranges', () => {
    const defaults = loadConfig({});
    expect([defaults.webhookSweepIntervalMs, defaults.bulkJobLeaseMs, defaults.JSON_BODY_LIMIT]).toEqual([10_000, 30_000, '1mb']);
    expect(defaults.webhookRetryDelaysMs).toEqual([30, 120, 600, 3600, 21_600, 86_400, 259_200].map((s) => s * 1000));
    const ends = loadConfig({ WEBHOOK_RETRY_SCHEDULE: ' 1s, 1000ms ,7d,168h', JSON_BODY_LIMIT: '1kb' });
    expect(ends.webhookRetryDelaysMs).toEqual([1000, 1000, 604_800_000, 604_800_000]);
    expect(() => loadConfig({ WEBHOOK_RETRY_SCHEDULE: Array(20).fill('1s').join(',') })).not.toThrow();
    for (const limit of ['1024b', '1KB', '100mb', '102400kb']) expect(loadConfig({ JSON_BODY_LIMIT: limit }).JSON_BODY_LIMIT).toBe(limit);
    // Every end is within a 32-bit timer.
    expect(Math.max(ends.webhookRetryDelaysMs[2], loadConfig({ BULK_JOB_LEASE: '60m', WEBHOOK_SWEEP_INTERVAL: '60m' }).bulkJobLeaseMs)).toBeLessThanOrEqual(2 ** 31 - 1);
  });

  it.each(['redis://:p@h:99999', 'redis://[::1', 'redis://:pa/ss@h:6379', 'redis://:pa#ss@h:6379'])(
    'REDIS_URL=%p, which does not parse as a URL, is a ConfigError naming it, without its password',
    (url) => {
      const message = configError({ REDIS_URL: url }).message;
      expect(message).toMatch(/^invalid configuration: REDIS_URL=".*" is not a valid URL/);
      expect(message).not.toContain('\n');
      expect(message).not.toMatch(/:p@|pa.ss/);
    },
  );

  it('accepts a REDIS_URL with a percent-encoded password, an IPv6 host or rediss://', () => {
    for (const url of ['redis://:pa%2Fss@h:6379', 'redis://[::1]:6379', 'rediss://user:pw@cache.example:6380/2', 'redis://h:6379/', 'redis://h:6379?db=3']) {
      expect(loadConfig({ REDIS_URL: url }).REDIS_URL).toBe(url);
    }
  });

  it('does not repeat the password of a DATABASE_URL that does not parse', () => {
    const message = configError({ DATABASE_URL: 'postgres://postgres:ab/cd#ef@127.0.0.1:5432/x' }).message;
    expect(message).toBe(
      'invalid configuration: DATABASE_URL="postgres://postgres:***@127.0.0.1:5432/x" is not a valid URL; percent-encode characters such as / # ? @ : and spaces in the user name and password',
    );
    expect(loadConfig({ DATABASE_URL: 'postgres://postgres:ab%2Fcd%23ef@127.0.0.1:5432/x' }).DATABASE_URL).toContain('ab%2Fcd');
  });

  // Fastify compiles TRUST_PROXY when the app is built: a value it refuses must stop start-up
  // here, naming the variable, and every value accepted here must build.
  it.each([
    'false', 'TRUE', '', '0', '2', 'loopback', 'loopback, 10.0.0.0/8', 'uniquelocal,linklocal', '10.0.0.1', '::1', 'fe80::/10',
    '10.0.0.0/255.0.0.0', '::ffff:10.0.0.1', '192.168.0.0/32', '2001:db8::/128',
  ])('TRUST_PROXY=%p is accepted, and Fastify builds with it', (value) => {
    const config = loadConfig({ TRUST_PROXY: value });
    expect(() => Fastify({ trustProxy: config.trustProxy })).not.toThrow();
  });

  it.each([
    'garbage', '10.0.0.0/33', '::1/129', '0.0.0.0/0', '10.0.0.0/8/8', '10.0.0.0/abc', '10.0.0.0/255.0.255.0', '::/ffff::', 'Loopback',
    'loopback,', 'loopback;10.0.0.1', '10.0.0.1 10.0.0.2', 'yes',
  ])('TRUST_PROXY=%p, which Fastify refuses, is a ConfigError in one line naming it', (value) => {
    expect(() => Fastify({ trustProxy: value })).toThrow();
    const message = configError({ TRUST_PROXY: value }).message;
    expect(message).toMatch(/^invalid configuration: TRUST_PROXY=".*" must be false, true, a hop count, or a comma list of /);
    expect(message).not.toContain('\n');
  });

  it('takes SVC_ENCRYPTION_KEY_PREVIOUS as one key or a comma list in SVC_ENCRYPTION_KEY\'s format, refusing anything else naming it', () => {
    const [hex, b64] = ['b'.repeat(64), Buffer.alloc(32, 7).toString('base64')];
    expect(loadConfig({ SVC_ENCRYPTION_KEY_PREVIOUS: hex }).SVC_ENCRYPTION_KEY_PREVIOUS).toBe(hex);
    expect(loadConfig({ SVC_ENCRYPTION_KEY_PREVIOUS: `${hex}, ${b64}` }).SVC_ENCRYPTION_KEY_PREVIOUS).toBe(`${hex}, ${b64}`);
    for (const bad of ['abc', `${hex},`, `${hex},short`, 'b'.repeat(63)]) {
      // The value is not shown: a malformed key may be nearly the real one.
      expect(configError({ SVC_ENCRYPTION_KEY_PREVIOUS: bad }).message).toBe(
        'invalid configuration: SVC_ENCRYPTION_KEY_PREVIOUS=(not shown) must be one key, or a comma list of keys, each 32 bytes as 64 hex digits or base64',
      );
    }
  });

  it('ignores variables it does not own', () => {
    expect(() => loadConfig({ SOMETHING_ELSE: '???' })).not.toThrow();
  });
});

describe('production requirements', () => {
  const key = 'a'.repeat(64);
  it('refuses to start in production without SVC_ENCRYPTION_KEY or SVC_OAUTH_REDIRECT_ALLOWLIST', () => {
    expect(() => loadConfig({ NODE_ENV: 'production', SVC_OAUTH_REDIRECT_ALLOWLIST: 'https://a.example/b' })).toThrow(/SVC_ENCRYPTION_KEY/);
    expect(() => loadConfig({ NODE_ENV: 'production', SVC_ENCRYPTION_KEY: key })).toThrow(/SVC_OAUTH_REDIRECT_ALLOWLIST/);
    expect(loadConfig({ NODE_ENV: 'production', SVC_ENCRYPTION_KEY: key, SVC_OAUTH_REDIRECT_ALLOWLIST: 'https://a.example/b' }).isProduction).toBe(true);
  });

  it.each([' , ,', 'not a url', 'https://a.example/b#done', 'https://user@a.example/b', 'https://a.example/b, javascript:alert(1)'])(
    'refuses to start with SVC_OAUTH_REDIRECT_ALLOWLIST=%p, which has an entry that is no redirect_uri or none at all, in one line naming it',
    (allowlist) => {
      const err = configError({ NODE_ENV: 'production', SVC_ENCRYPTION_KEY: key, SVC_OAUTH_REDIRECT_ALLOWLIST: allowlist });
      expect(err.message).toMatch(/^invalid configuration: SVC_OAUTH_REDIRECT_ALLOWLIST /);
      expect(err.message).not.toContain('\n');
    },
  );

  it('checks SVC_OAUTH_REDIRECT_ALLOWLIST entries outside production too, where an empty list is allowed', () => {
    expect(configError({ SVC_OAUTH_REDIRECT_ALLOWLIST: 'https://a.example/b, not a url' }).message).toContain('"not a url"');
    expect(() => loadConfig({ SVC_OAUTH_REDIRECT_ALLOWLIST: ' , ' })).not.toThrow();
    // An entry with a password is named without it.
    for (const entry of ['https://ops:hunter2-secret@a.example/b', 'https://ops:hunter2-secret/x@a.example/b']) {
      const withPassword = configError({ SVC_OAUTH_REDIRECT_ALLOWLIST: entry }).message;
      expect([entry, withPassword.includes('a.example/b'), withPassword.includes('hunter2-secret')]).toEqual([entry, true, false]);
    }
    expect(() => loadConfig({ NODE_ENV: 'production', SVC_ENCRYPTION_KEY: key, SVC_OAUTH_REDIRECT_ALLOWLIST: 'https://a.example/b, http://127.0.0.1:8080/cb,' })).not.toThrow();
  });
});
