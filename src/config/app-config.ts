/**
 * Owns the service's configuration: every environment variable, its default and its check.
 * `loadConfig` is the single source of truth; `.env.example` documents the same list.
 * An invalid value stops start-up with one line naming the variable (see main.ts).
 */
import { plainToInstance, Transform } from 'class-transformer';
import { IsBoolean, IsIn, IsInt, IsOptional, IsString, Matches, Max, Min, validateSync } from 'class-validator';

const bool = () =>
  Transform(({ value }) => {
    if (value === undefined || value === '') return undefined;
    const v = String(value).toLowerCase();
    if (['true', '1', 'yes', 'on'].includes(v)) return true;
    if (['false', '0', 'no', 'off'].includes(v)) return false;
    return value;
  });
const int = () =>
  Transform(({ value }) => (value === undefined || value === '' ? undefined : /^-?\d+$/.test(String(value)) ? Number(value) : value));

export class AppConfig {
  @IsIn(['development', 'production', 'test'])
  NODE_ENV = 'development';

  @int() @IsInt() @Min(0) @Max(65535)
  PORT = 3000;

  @IsString()
  HOST = '0.0.0.0';

  @Matches(/^postgres(ql)?:\/\/.+\/[^/?]+/, { message: 'must be a postgres:// URL with a database name' })
  DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/svc';

  @bool() @IsBoolean()
  MIGRATIONS_RUN = true;

  @Matches(/^rediss?:\/\/.+/, { message: 'must be a redis:// URL' })
  REDIS_URL = 'redis://127.0.0.1:6379';

  @Matches(/^[A-Za-z0-9:_-]{1,64}$/, { message: 'must be 1-64 letters, digits, ":", "_" or "-"' })
  REDIS_PREFIX = 'svc:';

  @IsOptional() @Matches(/^https?:\/\/[^/]+/, { message: 'must be an http(s) URL' })
  SVC_BASE_URL?: string;

  @IsIn(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
  LOG_LEVEL = 'info';

  /** Whose X-Forwarded-For to believe: false, true, a hop count, or a comma list of addresses/subnets. */
  @IsString()
  TRUST_PROXY = 'false';

  @bool() @IsBoolean()
  RATE_LIMIT_ENABLED = true;

  @int() @IsInt() @Min(1) @Max(1_000_000)
  RATE_LIMIT_REQUESTS = 300;

  @Matches(/^\d+(b|kb|mb)$/i, { message: 'must be a size such as 1mb or 512kb' })
  JSON_BODY_LIMIT = '1mb';

  @int() @IsInt() @Min(0) @Max(3600)
  KEY_CACHE_TTL_SECONDS = 60;

  /** Search recency boost (src/search): an item's boost halves every this many days of its
   *  `timestamp`'s age, from 2x down to 1x; 0 turns the boost off. */
  @int() @IsInt() @Min(0) @Max(36500)
  SEARCH_RECENCY_HALF_LIFE_DAYS = 30;

  /** Connections of the search pool (src/search): searches that PostgreSQL runs at once per
   *  process; more wait their turn. Searches are CPU-bound there, so about twice its cores. */
  @int() @IsInt() @Min(1) @Max(100)
  SEARCH_DB_POOL_SIZE = 4;

  /** How long an Idempotency-Key's first response is replayed to retries (src/idempotency). */
  @int() @IsInt() @Min(1) @Max(720)
  IDEMPOTENCY_TTL_HOURS = 24;

  /** Largest blob upload in bytes (default 25 MiB); larger gets 413 `blob_too_large`. */
  @int() @IsInt() @Min(1) @Max(Number.MAX_SAFE_INTEGER)
  BLOB_MAX_BYTES = 26_214_400;

  /** Where blob content lives: files under BLOB_DIR, or rows in PostgreSQL (`blob_chunks`). */
  @IsIn(['disk', 'postgres'])
  BLOB_STORAGE: 'disk' | 'postgres' = 'disk';

  /** Disk blob store root (`<dir>/<tenant>/<hash[0:2]>/<hash>`); uploads are staged in
   *  `<dir>/.staging` with either backend, so it must be writable. */
  @IsString()
  BLOB_DIR = './data/blobs';

  get baseUrl(): string {
    return (this.SVC_BASE_URL ?? `http://localhost:${this.PORT}`).replace(/\/+$/, '');
  }

  get isProduction(): boolean {
    return this.NODE_ENV === 'production';
  }

  /**
   * Fastify's `trustProxy` for TRUST_PROXY. A hop count becomes a function, because Fastify
   * trusts no hop at all for a number, where a count of n means the n nearest proxies.
   */
  get trustProxy(): boolean | string | ((address: string, hop: number) => boolean) {
    const v = this.TRUST_PROXY.trim().toLowerCase();
    if (v === 'true') return true;
    if (v === 'false' || v === '') return false;
    if (/^\d+$/.test(v)) {
      const hops = Number(v);
      return (_address, hop) => hop < hops;
    }
    return this.TRUST_PROXY;
  }
}

export class ConfigError extends Error {}

/** Builds the config from an environment; throws ConfigError naming the first bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): AppConfig {
  const known = Object.keys(new AppConfig()).concat(['SVC_BASE_URL']);
  const raw: Record<string, unknown> = {};
  for (const name of known) {
    const value = env[name];
    if (value !== undefined && value !== '') raw[name] = value;
  }
  const config = Object.assign(new AppConfig(), plainToInstance(AppConfig, raw, { exposeDefaultValues: true }));
  const errors = validateSync(config, { skipMissingProperties: false });
  if (errors.length > 0) {
    const first = errors[0];
    // The type check speaks first: "PORT=x must be an integer", not "must not be greater than".
    const constraints = first.constraints ?? {};
    const why = constraints.isInt ?? constraints.isBoolean ?? constraints.isIn ?? Object.values(constraints)[0] ?? 'is invalid';
    const shown = why.startsWith(first.property) ? why.slice(first.property.length).trim() : why;
    throw new ConfigError(`invalid configuration: ${first.property}=${JSON.stringify(env[first.property] ?? '')} ${shown}`);
  }
  return config;
}
