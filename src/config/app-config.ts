/**
 * Owns the service's configuration: every environment variable, its default and its check.
 * `loadConfig` is the single source of truth; `.env.example` documents the same list.
 * An invalid value stops start-up with one line naming the variable (see main.ts).
 */
import { plainToInstance, Transform } from 'class-transformer';
import { IsBoolean, IsIn, IsInt, IsOptional, IsString, Matches, Max, Min, ValidateBy, validateSync } from 'class-validator';
import ipaddr from 'ipaddr.js';
import type { CorsOrigins } from '../common/cors';
import { maskPassword } from '../common/startup-error';
import { redirectAllowlistProblem } from '../integrations/redirect-allowlist';

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
/**
 * The value parses as a WHATWG URL, as pg and the service parse it: a URL the pattern accepts
 * may not parse (a space, a `/` or `#` in an unencoded password), and would then fail later,
 * with a stack trace or "Invalid URL" and no variable named.
 */
const parsesAsUrl = (message: string) =>
  ValidateBy({ name: 'parsesAsUrl', validator: { validate: (value) => typeof value === 'string' && URL.canParse(value), defaultMessage: () => message } });

/**
 * A Redis URL's database, as ioredis reads it (the path, or `?db=`), is a whole number when there
 * is one: ioredis sends `SELECT NaN` for `/abc`, whose refusal is thrown out of the client
 * uncaught and ends the process with a stack trace.
 */
const redisDatabaseIsNumber = () =>
  ValidateBy({
    name: 'redisDatabaseIsNumber',
    validator: {
      validate: (value) => {
        if (typeof value !== 'string' || !URL.canParse(value)) return true; // parsesAsUrl says so
        const url = new URL(value);
        const databases = [url.pathname.replace(/^\//, ''), ...url.searchParams.getAll('db')].filter((d) => d !== '');
        return databases.every((d) => /^\d{1,9}$/.test(d));
      },
      defaultMessage: () => 'names a database that is not a whole number (redis://host:6379/0, or ?db=0)',
    },
  });

type Unit = 'ms' | 's' | 'm' | 'h' | 'd';
const UNIT_MS: Record<Unit, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `30s`, `2m`, `500ms` in one of `units` → milliseconds, or undefined when it is none. */
function parseDuration(text: string, units: readonly string[]): number | undefined {
  const m = /^(\d+)(ms|s|m|h|d)$/.exec(text);
  return m && units.includes(m[2]) ? Number(m[1]) * UNIT_MS[m[2] as Unit] : undefined;
}

/** `30s`, `2m`, `500ms` → milliseconds (the format is checked by the decorators below). */
export function durationMs(text: string): number {
  return parseDuration(text, Object.keys(UNIT_MS))!;
}

/**
 * A duration setting (or, with `list`, a comma list of 1-20 of them) in one of `units`, each
 * from `min` to `max`. The bounds are what keeps a timer sane: 0 would turn a sweep into a
 * hot loop, and Node runs a timer of 2^31 ms or more after 1 ms instead (TimeoutOverflowWarning).
 */
const durations = (range: { units: readonly Unit[]; min: string; max: string; list?: boolean; example: string }) => {
  const [min, max] = [durationMs(range.min), durationMs(range.max)];
  const within = (text: string) => {
    const ms = parseDuration(text.trim(), range.units);
    return ms !== undefined && ms >= min && ms <= max;
  };
  const what = range.list ? `a comma list of 1-20 durations, each from ${range.min} to ${range.max},` : `a duration from ${range.min} to ${range.max},`;
  return ValidateBy({
    name: 'durations',
    validator: {
      validate: (value) => typeof value === 'string' && (range.list ? value.split(',').length <= 20 && value.split(',').every(within) : within(value)),
      defaultMessage: () => `must be ${what} such as ${range.example} (units: ${range.units.join(', ')})`,
    },
  });
};

const SIZE_BYTES: Record<string, number> = { b: 1, kb: 1024, mb: 1024 * 1024 };
/** `512kb` → bytes, as body-parser reads its limit (1kb = 1024 bytes), or undefined when it is no size. */
export function sizeBytes(text: string): number | undefined {
  const m = /^(\d+)(b|kb|mb)$/i.exec(text);
  return m ? Number(m[1]) * SIZE_BYTES[m[2].toLowerCase()] : undefined;
}
/** The value is a size (`b`, `kb`, `mb`) from `min` to `max`. */
const sizeWithin = (min: string, max: string) =>
  ValidateBy({
    name: 'sizeWithin',
    validator: {
      validate: (value) => {
        const bytes = typeof value === 'string' ? sizeBytes(value) : undefined;
        return bytes !== undefined && bytes >= sizeBytes(min)! && bytes <= sizeBytes(max)!;
      },
      defaultMessage: () => `must be a size from ${min} to ${max}, such as 1mb or 512kb`,
    },
  });

const fastifyTrustProxy = () =>
  ValidateBy({
    name: 'trustProxy',
    validator: {
      validate: (value) => typeof value === 'string' && trustProxyProblem(value) === undefined,
      defaultMessage: (args) =>
        `must be false, true, a hop count, or a comma list of IP addresses, subnets (10.0.0.0/8) and loopback, linklocal or uniquelocal: ${trustProxyProblem(String(args?.value))}`,
    },
  });

/** The names @fastify/proxy-addr expands into ranges (case-sensitive there). */
const PROXY_RANGE_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/**
 * Why Fastify would refuse TRUST_PROXY (thrown from deep inside Nest at start, naming no
 * variable), or undefined. Fastify hands a string that is no boolean or hop count (see
 * `trustProxy` below) to @fastify/proxy-addr, split at commas and trimmed; this follows that
 * package's parseipNotation with the same ipaddr.js: an address, or address/prefix (1-32 or
 * 1-128; an IPv4 netmask too), or a range name.
 */
export function trustProxyProblem(value: string): string | undefined {
  const setting = trustProxySetting(value);
  if (typeof setting !== 'string') return undefined;
  for (const entry of setting.split(',').map((e) => e.trim())) {
    if (PROXY_RANGE_NAMES.has(entry)) continue;
    const slash = entry.lastIndexOf('/');
    const address = slash === -1 ? entry : entry.slice(0, slash);
    if (!ipaddr.isValid(address)) return `${JSON.stringify(entry)} is not an IP address`;
    if (slash === -1) continue;
    const ip = ipaddr.parse(address);
    const max = ip.kind() === 'ipv6' ? 128 : 32;
    const range = entry.slice(slash + 1);
    const prefix = /^\d+$/.test(range)
      ? Number(range)
      : ip.kind() === 'ipv4' && ipaddr.IPv4.isValid(range)
        ? ipaddr.IPv4.parse(range).prefixLengthFromSubnetMask()
        : null;
    if (prefix === null || prefix < 1 || prefix > max) return `${JSON.stringify(entry)} has no prefix length from 1 to ${max}`;
  }
  return undefined;
}

/** TRUST_PROXY as Fastify takes it: true, false, a hop count, or else the list itself. */
function trustProxySetting(value: string): boolean | string | ((address: string, hop: number) => boolean) {
  const v = value.trim().toLowerCase();
  if (v === 'true') return true;
  if (v === 'false' || v === '') return false;
  if (/^\d+$/.test(v)) {
    const hops = Number(v);
    return (_address, hop) => hop < hops;
  }
  return value;
}

export class AppConfig {
  @IsIn(['development', 'production', 'test'])
  NODE_ENV = 'development';

  @int() @IsInt() @Min(0) @Max(65535)
  PORT = 3000;

  @IsString()
  HOST = '0.0.0.0';

  @Matches(/^postgres(ql)?:\/\/.+\/[^/?]+/, { message: 'must be a postgres:// URL with a database name' })
  @parsesAsUrl('is not a valid URL; percent-encode characters such as / # ? @ : and spaces in the user name and password')
  DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/svc';

  @bool() @IsBoolean()
  MIGRATIONS_RUN = true;

  /** Longest a request's SQL statement may run (ms, 0 = no limit); migrations are not bound by it. */
  @int() @IsInt() @Min(0) @Max(3_600_000)
  DATABASE_STATEMENT_TIMEOUT_MS = 30_000;

  @Matches(/^rediss?:\/\/.+/, { message: 'must be a redis:// URL' })
  @parsesAsUrl('is not a valid URL; percent-encode characters such as / # ? @ in the password, and give a port from 0 to 65535')
  @redisDatabaseIsNumber()
  REDIS_URL = 'redis://127.0.0.1:6379';

  @Matches(/^[A-Za-z0-9:_-]{1,64}$/, { message: 'must be 1-64 letters, digits, ":", "_" or "-"' })
  REDIS_PREFIX = 'svc:';

  @IsOptional() @Matches(/^https?:\/\/[^/]+/, { message: 'must be an http(s) URL' }) @parsesAsUrl('is not a valid URL')
  SVC_BASE_URL?: string;

  @IsIn(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
  LOG_LEVEL = 'info';

  /** Whose X-Forwarded-For to believe: false, true, a hop count, or a comma list of addresses/subnets. */
  @IsString() @fastifyTrustProxy()
  TRUST_PROXY = 'false';

  @bool() @IsBoolean()
  RATE_LIMIT_ENABLED = true;

  @int() @IsInt() @Min(1) @Max(1_000_000)
  RATE_LIMIT_REQUESTS = 300;

  /** Largest JSON or form body. At least 1kb: below it ordinary requests get 413 (0b refuses
   *  every body); at most 100mb, since body-parser holds a whole body in memory as one string and
   *  JSON.parse blocks the event loop for all of it (blobs, the large uploads, stream past it). */
  @sizeWithin('1kb', '100mb')
  JSON_BODY_LIMIT = '1mb';

  /** Longest a request may take to arrive, headers and body (ms); later is 408. Blob uploads
   *  must arrive whole within it: the default takes BLOB_MAX_BYTES' default 25 MiB at 700 kbit/s. */
  @int() @IsInt() @Min(1000) @Max(3_600_000)
  REQUEST_TIMEOUT_MS = 300_000;

  @int() @IsInt() @Min(0) @Max(3600)
  KEY_CACHE_TTL_SECONDS = 60;

  /** Search recency boost (src/search): an item's boost halves every this many days of its
   *  `timestamp`'s age, from 2x down to 1x; 0 turns the boost off. */
  @int() @IsInt() @Min(0) @Max(36500)
  SEARCH_RECENCY_HALF_LIFE_DAYS = 30;

  /** Searches one tenant runs at once per process (src/search; the pool holds one connection
   *  more, for other tenants); more wait their turn. Searches are CPU-bound in PostgreSQL, so
   *  about twice its cores. */
  @int() @IsInt() @Min(1) @Max(100)
  SEARCH_DB_POOL_SIZE = 4;

  /** How long an Idempotency-Key's first response is replayed to retries (src/idempotency). */
  @int() @IsInt() @Min(1) @Max(720)
  IDEMPOTENCY_TTL_HOURS = 24;

  /** How long an Idempotency-Key's claim outlives its request's last sign of life (renewed a
   *  third of the way through): after that, a retry may run the request again unless its work
   *  had committed (src/idempotency). */
  @int() @IsInt() @Min(2) @Max(3600)
  IDEMPOTENCY_LEASE_SECONDS = 30;

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

  /** Delays between a webhook delivery's attempts (src/webhooks): after the first attempt
   *  fails, one more attempt per entry; after the last the delivery is `failed`. Each from 1s
   *  (a receiver that just failed gets a moment) to 7d: Bull holds no Node timer longer than its
   *  5 s guard interval for a delay, but a later retry would outlive the default
   *  EVENT_RETENTION_DAYS, and 7d stays within a 32-bit timer wherever it is used as one. */
  @durations({ units: ['ms', 's', 'm', 'h', 'd'], min: '1s', max: '7d', list: true, example: '30s,2m,1h' })
  WEBHOOK_RETRY_SCHEDULE = '30s,2m,10m,1h,6h,24h,72h';

  /** Whether webhooks may target private, loopback or link-local addresses and plain http
   *  (local development). Off by default in production. */
  @IsOptional() @bool() @IsBoolean()
  WEBHOOK_ALLOW_PRIVATE_TARGETS?: boolean;

  /** How many webhooks a tenant may have registered: each write fans out to all of them, so
   *  without a bound one key could turn every write into any number of outbound requests. */
  @int() @IsInt() @Min(1) @Max(10_000)
  WEBHOOKS_MAX_PER_TENANT = 100;

  /** How many webhooks one credential that is not an admin's (a member key, an OAuth token's
   *  grant or client) may hold, so that it cannot take the tenant's whole allowance. */
  @int() @IsInt() @Min(1) @Max(10_000)
  WEBHOOKS_MAX_PER_CREDENTIAL = 10;

  /** How many webhooks one user's OAuth grants may hold together, so that a user who grants many
   *  apps (or revokes and grants one again) cannot take the tenant's whole allowance either. */
  @int() @IsInt() @Min(1) @Max(10_000)
  WEBHOOKS_MAX_PER_USER = 20;

  /** How long a webhook receiver has to answer one attempt. */
  @int() @IsInt() @Min(100) @Max(120_000)
  WEBHOOK_TIMEOUT_MS = 10_000;

  /** Whether this instance relays events and delivers webhooks (the relay, first attempts,
   *  retries, the sweeper). False makes an instance that takes writes and serves event streams
   *  and leaves delivery to the instances that have it on (src/events, src/webhooks). */
  @bool() @IsBoolean()
  EVENT_DELIVERY_ENABLED = true;

  /** How often each instance looks for deliveries that are due but not queued (after a Redis
   *  loss or a crash): the delay a lost retry can suffer beyond its schedule. From 100ms (each
   *  sweep is a query on every instance) to 60m. */
  @durations({ units: ['ms', 's', 'm'], min: '100ms', max: '60m', example: '10s' })
  WEBHOOK_SWEEP_INTERVAL = '10s';

  /** Bulk actions matching more items than this run as a background job (202) instead of in
   *  the request (src/bulk). */
  @int() @IsInt() @Min(0) @Max(50_000)
  BULK_SYNC_MAX = 1000;

  /** Bulk jobs (queued or running) one tenant may have unfinished at once; past that a new job
   *  is 429 `rate_limited`. The jobs of all tenants share one first-come-first-served queue, so
   *  this bounds how many of one tenant's jobs another tenant's job can find ahead of it. */
  @int() @IsInt() @Min(1) @Max(1000)
  BULK_JOBS_MAX_UNFINISHED_PER_TENANT = 10;

  /** Bulk jobs one instance runs at once; 0 makes an instance that only takes requests. */
  @int() @IsInt() @Min(0) @Max(32)
  BULK_CONCURRENCY = 2;

  /** How long a bulk job whose worker has died (or lost its database) waits before another
   *  worker resumes it; the running worker renews its lease well within it. From 1s to 60m:
   *  it is Bull's lockDuration and stalledInterval, and the sweep runs every half of it and the
   *  renewal every third, all timers. */
  @durations({ units: ['ms', 's', 'm'], min: '1s', max: '60m', example: '30s' })
  BULK_JOB_LEASE = '30s';

  /** Days an ended bulk job (completed, failed, cancelled) stays readable, counted from its
   *  end; then the bulk janitor deletes it (src/bulk/bulk-janitor.ts). Queued and running jobs
   *  are kept whatever their age. */
  @int() @IsInt() @Min(1) @Max(365)
  BULK_JOB_RETENTION_DAYS = 30;

  /** Lifetime of OAuth access tokens (`svc_at_`) in seconds (src/oidc). */
  @int() @IsInt() @Min(60) @Max(86_400)
  ACCESS_TOKEN_TTL = 3600;

  /** Origins a browser app may call the API from (CORS, src/common/cors.ts): `*` (any, the
   *  default: the API takes bearer credentials only, never cookies), a comma list of origins
   *  (`https://app.example.com,http://localhost:5173`), or `none`. */
  @Transform(({ value }) => (typeof value === 'string' ? value.trim() : value))
  @IsString()
  @ValidateBy({
    name: 'corsOrigins',
    validator: { validate: (value) => typeof value === 'string' && corsOriginsOf(value) !== undefined },
    constraints: [],
  }, { message: 'must be *, none, or a comma list of origins such as https://app.example.com (scheme, host and port only)' })
  CORS_ORIGINS = '*';

  /** Whether JSON and text answers of 1 KiB or more are compressed for clients that accept it
   *  (src/common/compression.ts); off where a proxy in front compresses, or CPU is short. */
  @bool() @IsBoolean()
  RESPONSE_COMPRESSION = true;

  /** Whether /auth/sign-up is open: anyone may create a tenant of their own, as its admin user. */
  @bool() @IsBoolean()
  SVC_SIGNUP_ENABLED = false;

  /** Whether every tenant's admins may vouch for their users' addresses (`email_verified`), not
   *  only the root tenant's: all tenants share one issuer, and relying parties that link accounts
   *  by a verified email would trust any tenant's word for any address (src/users/users.service.ts). */
  @bool() @IsBoolean()
  TENANT_ADMINS_VERIFY_EMAILS = false;

  /** Failed sign-ins to one account from one client address, in 15 minutes, after which that
   *  address is refused for that account until they are over (src/users/sign-in-throttle.ts). */
  @int() @IsInt() @Min(1) @Max(10_000)
  SIGN_IN_MAX_FAILURES_PER_ADDRESS = 10;

  /** Failed sign-ins to one account from every address together, in 15 minutes, after which
   *  the account is refused from everywhere until they are over: the bound on guessing from
   *  many addresses. */
  @int() @IsInt() @Min(1) @Max(1_000_000)
  SIGN_IN_MAX_FAILURES_PER_ACCOUNT = 100;

  /** Comma list of the redirect_uri values the connector OAuth bootstrap (/oauth/start) may send
   *  a user back to, compared after normalising scheme, host, default port and path. Required in
   *  production; every entry must be an http(s) URL without fragment or user info. */
  @IsOptional() @IsString()
  SVC_OAUTH_REDIRECT_ALLOWLIST?: string;

  /** Seconds a device-flow client waits between polls (`interval`); faster is `slow_down`. */
  @int() @IsInt() @Min(1) @Max(60)
  OAUTH_DEVICE_POLL_INTERVAL = 5;

  /** Days events stay in the outbox for `Last-Event-ID` replay (src/events). */
  @int() @IsInt() @Min(1) @Max(365)
  EVENT_RETENTION_DAYS = 7;

  /** Seconds between heartbeat comments on an open event stream. */
  @int() @IsInt() @Min(1) @Max(300)
  EVENTS_HEARTBEAT_SECONDS = 15;

  /** 32 bytes, base64 or hex: the key that encrypts webhook secrets (src/crypto). Required in
   *  production; elsewhere one is generated and kept in the database when unset. */
  @IsOptional() @Matches(/^([0-9a-fA-F]{64}|[A-Za-z0-9+/_-]{43}=?)$/, { message: 'must be 32 bytes as 64 hex digits or base64' })
  SVC_ENCRYPTION_KEY?: string;

  /** The keys SVC_ENCRYPTION_KEY replaced, same format, comma-separated: values sealed under them
   *  still open until `npm run secrets:reseal` has re-sealed them under the current key. */
  @IsOptional()
  @Matches(/^\s*([0-9a-fA-F]{64}|[A-Za-z0-9+/_-]{43}=?)\s*(,\s*([0-9a-fA-F]{64}|[A-Za-z0-9+/_-]{43}=?)\s*)*$/, {
    message: 'must be one key, or a comma list of keys, each 32 bytes as 64 hex digits or base64',
  })
  SVC_ENCRYPTION_KEY_PREVIOUS?: string;

  get baseUrl(): string {
    return (this.SVC_BASE_URL ?? `http://localhost:${this.PORT}`).replace(/\/+$/, '');
  }

  /** CORS_ORIGINS as the CORS hook takes it. */
  get corsOrigins(): CorsOrigins {
    return corsOriginsOf(this.CORS_ORIGINS)!;
  }

  /** Whether cookies the service sets are `Secure`: it is served over https. */
  get secureCookies(): boolean {
    return this.baseUrl.startsWith('https:');
  }

  get isProduction(): boolean {
    return this.NODE_ENV === 'production';
  }

  get allowPrivateWebhookTargets(): boolean {
    return this.WEBHOOK_ALLOW_PRIVATE_TARGETS ?? !this.isProduction;
  }

  get webhookRetryDelaysMs(): number[] {
    return this.WEBHOOK_RETRY_SCHEDULE.split(',').map((d) => durationMs(d.trim()));
  }

  get bulkJobLeaseMs(): number {
    return durationMs(this.BULK_JOB_LEASE);
  }

  get webhookSweepIntervalMs(): number {
    return durationMs(this.WEBHOOK_SWEEP_INTERVAL);
  }

  /**
   * Fastify's `trustProxy` for TRUST_PROXY. A hop count becomes a function, because Fastify
   * trusts no hop at all for a number, where a count of n means the n nearest proxies.
   */
  get trustProxy(): boolean | string | ((address: string, hop: number) => boolean) {
    return trustProxySetting(this.TRUST_PROXY);
  }
}

/** CORS_ORIGINS read: `*`, or the set of origins (`none`: empty); undefined when an entry is no origin. */
function corsOriginsOf(text: string): CorsOrigins | undefined {
  if (text === '*') return '*';
  const entries = text === 'none' ? [] : text.split(',').map((entry) => entry.trim());
  // An origin is a URL's scheme, host and port as the browser sends it: what URL.origin writes.
  return entries.every((entry) => /^https?:\/\//.test(entry) && URL.parse(entry)?.origin === entry) ? new Set(entries) : undefined;
}

export class ConfigError extends Error {}

/** Builds the config from an environment; throws ConfigError naming the first bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): AppConfig {
  const known = Object.keys(new AppConfig()).concat(['SVC_BASE_URL', 'WEBHOOK_ALLOW_PRIVATE_TARGETS', 'SVC_ENCRYPTION_KEY', 'SVC_ENCRYPTION_KEY_PREVIOUS', 'SVC_OAUTH_REDIRECT_ALLOWLIST']);
  const raw: Record<string, unknown> = {};
  for (const name of known) {
    const value = env[name];
    if (value !== undefined && value !== '') raw[name] = value;
  }
  const config = Object.assign(new AppConfig(), plainToInstance(AppConfig, raw, { exposeDefaultValues: true }));
  const errors = validateSync(config, { skipMissingProperties: false });
  if (!errors.length && config.isProduction && !config.SVC_ENCRYPTION_KEY) {
    throw new ConfigError('invalid configuration: SVC_ENCRYPTION_KEY is required when NODE_ENV=production');
  }
  // Required in production, and its entries are checked by the rule /oauth/start compares them with (redirect-allowlist.ts).
  const allowlistProblem = errors.length ? undefined : redirectAllowlistProblem(config.SVC_OAUTH_REDIRECT_ALLOWLIST, config.isProduction);
  if (allowlistProblem) throw new ConfigError(`invalid configuration: SVC_OAUTH_REDIRECT_ALLOWLIST ${allowlistProblem}`);
  if (errors.length > 0) {
    const first = errors[0];
    // The type check speaks first: "PORT=x must be an integer", not "must not be greater than".
    const constraints = first.constraints ?? {};
    const why = constraints.isInt ?? constraints.isBoolean ?? constraints.isIn ?? Object.values(constraints)[0] ?? 'is invalid';
    const shown = why.startsWith(first.property) ? why.slice(first.property.length).trim() : why;
    // A URL's password is not repeated into the log, nor an encryption key (a malformed one may be nearly right).
    const value = first.property.endsWith('_URL') ? maskPassword(env[first.property] ?? '') : (env[first.property] ?? '');
    const quoted = first.property.startsWith('SVC_ENCRYPTION_KEY') ? '(not shown)' : JSON.stringify(value);
    throw new ConfigError(`invalid configuration: ${first.property}=${quoted} ${shown}`);
  }
  return config;
}
