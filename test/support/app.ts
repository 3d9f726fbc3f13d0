/**
 * e2e harness: starts the real service (createApp, the same path as main.ts) listening on an
 * ephemeral loopback port, against its own freshly created database and its own Redis key
 * prefix, and tears both down afterwards. Tests talk to it over HTTP with supertest.
 */
import { randomBytes } from 'node:crypto';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import Redis from 'ioredis';
import { Client } from 'pg';
import request from 'supertest';
import TestAgent from 'supertest/lib/agent';
import { createApp } from '../../src/app.factory';
import { AppConfig, loadConfig } from '../../src/config/app-config';
import { freePort } from './process';

export const PG_SERVER = process.env.TEST_PG_SERVER ?? 'postgres://postgres@127.0.0.1:5432';
export const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

export interface TestApp {
  app: NestFastifyApplication;
  config: AppConfig;
  url: string;
  databaseUrl: string;
  http: TestAgent;
  /** Runs SQL directly against this app's database (for assertions about storage). */
  sql<T = Record<string, unknown>>(text: string, params?: unknown[]): Promise<T[]>;
  close(): Promise<void>;
}

export function uniqueName(prefix: string): string {
  return `${prefix}_${randomBytes(6).toString('hex')}`;
}

async function adminQuery(text: string): Promise<void> {
  const client = new Client({ connectionString: `${PG_SERVER}/postgres` });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

/** Test-run defaults: quiet logs, no rate limits unless a test turns them on. */
export function testEnv(overrides: Record<string, string> = {}): Record<string, string> {
  const db = uniqueName('svc_test');
  return {
    NODE_ENV: 'test',
    DATABASE_URL: `${PG_SERVER}/${db}`,
    REDIS_URL,
    REDIS_PREFIX: `${uniqueName('svct')}:`,
    LOG_LEVEL: 'silent',
    RATE_LIMIT_ENABLED: 'false',
    PORT: '0',
    HOST: '127.0.0.1',
    ...overrides,
  };
}

export async function startApp(overrides: Record<string, string> = {}): Promise<TestApp> {
  // The port is chosen before start: SVC_BASE_URL, the OAuth issuer, must name it.
  const port = overrides.PORT && overrides.PORT !== '0' ? overrides.PORT : String(await freePort());
  const env = testEnv({ SVC_BASE_URL: `http://127.0.0.1:${port}`, ...overrides, PORT: port });
  const config = loadConfig(env);
  const app = await createApp(config);
  await app.listen(config.PORT, '127.0.0.1');
  const address = app.getHttpServer().address() as { port: number };
  const url = `http://127.0.0.1:${address.port}`;
  const dbName = new URL(config.DATABASE_URL).pathname.slice(1);
  const sqlClient = new Client({ connectionString: config.DATABASE_URL });
  // Tests that share one database between two apps drop it under the other's connection.
  sqlClient.on('error', () => undefined);
  await sqlClient.connect();
  return {
    app,
    config,
    url,
    databaseUrl: config.DATABASE_URL,
    http: request(url),
    sql: async <T>(text: string, params?: unknown[]) => (await sqlClient.query(text, params)).rows as T[],
    close: async () => {
      await app.close();
      await sqlClient.end();
      await adminQuery(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
      await clearRedisPrefix(config.REDIS_PREFIX);
    },
  };
}

export async function clearRedisPrefix(prefix: string): Promise<void> {
  const redis = new Redis(REDIS_URL);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      if (keys.length) await redis.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}

export async function dropDatabase(name: string): Promise<void> {
  await adminQuery(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
}

export const bearer = (key: string) => ({ Authorization: `Bearer ${key}` });

/** Bootstraps the server and returns the root tenant's admin key (plaintext). */
export async function bootstrapAdmin(t: TestApp): Promise<{ key: string; id: string; tenantId: string }> {
  const res = await t.http.post('/keys').send({ label: 'root admin' }).expect(201);
  return { key: res.body.key, id: res.body.id, tenantId: res.body.tenant_id };
}

/** Creates a key with the given body using an admin key; returns the creation response body. */
export async function createKey(t: TestApp, adminKey: string, body: Record<string, unknown>): Promise<Record<string, any>> {
  const res = await t.http.post('/keys').set(bearer(adminKey)).send(body);
  if (res.status !== 201) throw new Error(`key creation failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** Creates a second tenant and returns its admin key. */
export async function createTenant(t: TestApp, rootAdminKey: string, name = 'other'): Promise<{ key: string; tenantId: string }> {
  const res = await t.http.post('/tenants').set(bearer(rootAdminKey)).send({ name }).expect(201);
  return { key: res.body.admin_key.key, tenantId: res.body.tenant.id };
}
