/** CONTRACT: GET /openapi.json (OpenAPI 3.1.0, info.version 4.2.0) lists every route; /docs works offline. */
import { Ajv2020 } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { plainToInstance } from 'class-transformer';
import { getMetadataStorage, validateSync } from 'class-validator';
import type { ValidationMetadata } from 'class-validator/types/metadata/ValidationMetadata';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isPattern } from '../src/common/type-pattern';
import { EVENT_NAMES } from '../src/events/event-catalogue';
import { MetadataPatchDto } from '../src/items/items.dto';
import { ConnectorCallbackQuery, StartConnectionQuery } from '../src/integrations/connections.dto';
import { ListIntegrationsQuery } from '../src/integrations/integrations.dto';
import { MANIFEST_SCHEMA } from '../src/integrations/manifest-schema';
import { oidcOpenApiPaths } from '../src/oidc/openapi-paths';
import { OPERATION_IDS } from '../src/openapi/operation-ids';
import { CreateKeyDto } from '../src/keys/keys.dto';
import request from 'supertest';
import { bearer, bootstrapAdmin, startApp, TestApp } from './support/app';
import { browse, field } from './support/browse';
import { badFields, expectError } from './support/envelope';

/**
 * Every (path, methods) the running Fastify instance routes, from its route tree
 * (printRoutes with full segments: one line per node, four columns of tree drawing per level).
 */
function routeTable(t: TestApp): Array<{ path: string; methods: string[] }> {
  const tree = t.app.getHttpAdapter().getInstance().printRoutes({ commonPrefix: false });
  const stack: string[] = [];
  const out: Array<{ path: string; methods: string[] }> = [];
  for (const line of tree.split('\n')) {
    const m = /^([│├└─\s]*)(\S+)(?: \(([^)]*)\))?$/.exec(line);
    if (!m) continue;
    const depth = m[1].length / 4 - 1; // top-level nodes are drawn one level in
    stack.length = depth;
    stack.push(m[2]);
    if (m[3]) out.push({ path: stack.join(''), methods: m[3].split(',').map((x) => x.trim().toLowerCase()) });
  }
  return out;
}

/** Sub-applications mounted at a prefix (an OAuth provider, say: a `/prefix/*` route): their prefixes. */
function mountedPrefixes(t: TestApp): string[] {
  return routeTable(t)
    .filter((r) => r.path.endsWith('/*') && !r.path.startsWith('/docs'))
    .map((r) => r.path.slice(0, -2));
}

/** Every (method, path) the running app routes to a handler, in OpenAPI path syntax. */
function registeredRoutes(t: TestApp): Array<{ method: string; path: string }> {
  const out: Array<{ method: string; path: string }> = [];
  for (const { path: raw, methods } of routeTable(t)) {
    if (raw.endsWith('/*')) continue;
    const path = raw.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    // HEAD beside GET, Fastify's automatic sibling route (exposeHeadRoutes), is answered too.
    for (const method of methods) out.push({ method, path });
  }
  return out;
}

describe('OpenAPI and docs', () => {
  let t: TestApp;
  let doc: Record<string, any>;

  beforeAll(async () => {
    t = await startApp();
    const res = await t.http.get('/openapi.json').expect(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    doc = res.body;
  });
  afterAll(() => t.close());

  /** The root tenant's admin key, bootstrapped by the first test that needs it. */
  let bootstrapped: Promise<{ key: string; id: string }> | undefined;
  const rootAdmin = () => (bootstrapped ??= bootstrapAdmin(t));

  /** Whether `data` matches a schema of the document (its $refs resolved against the document's components): true, or ajv's complaint. */
  let ajv: Ajv2020 | undefined;
  const matches = (schema: object, data: unknown): true | string => {
    if (!ajv) {
      ajv = new Ajv2020({ strict: false, allErrors: true });
      addFormats(ajv);
      ajv.addSchema({ $id: 'doc', components: doc.components });
    }
    const validate = ajv.compile(JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"doc#/components/')));
    return validate(data) || ajv.errorsText(validate.errors);
  };
  const json = (at: { content?: Record<string, { schema: object }> }) => at.content!['application/json'].schema;

  it('is OpenAPI 3.1.0 at version 4.2.0', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info.version).toBe('4.2.0');
    // The service's one version: package.json says the same.
    expect(JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8')).version).toBe(doc.info.version);
    expect(typeof doc.info.title).toBe('string');
  });

  it('carries a weak ETag and no-cache, and answers a matching If-None-Match with 304 in any encoding', async () => {
    const first = await t.http.get('/openapi.json').set('Accept-Encoding', 'identity').expect(200);
    const etag = first.headers.etag;
    expect(etag).toMatch(/^W\/"[\w-]+"$/);
    expect(first.headers['cache-control']).toBe('no-cache');
    const packed = await t.http.get('/openapi.json').set('Accept-Encoding', 'gzip').expect(200);
    expect([packed.headers['content-encoding'], packed.headers.etag]).toEqual(['gzip', etag]);
    for (const [given, status] of [[etag, 304], [etag.slice(2), 304], [`"other", ${etag}`, 304], ['*', 304], ['W/"other"', 200]] as const) {
      const res = await t.http.get('/openapi.json').set('If-None-Match', given);
      expect({ given, status: res.status, etag: res.headers.etag, empty: res.status === 304 ? res.text ?? '' : '' }).toEqual({ given, status, etag, empty: '' });
    }
    expect(doc.paths['/openapi.json'].get.responses['304']).toBeDefined();
  });

  it('documents every route the server actually serves', () => {
    const routes = registeredRoutes(t);
    // Sanity: the walk finds the foundation's routes.
    expect(routes).toEqual(
      expect.arrayContaining([
        { method: 'get', path: '/health' },
        { method: 'post', path: '/keys' },
        { method: 'get', path: '/keys' },
        { method: 'get', path: '/keys/{id}' },
        { method: 'patch', path: '/keys/{id}' },
        { method: 'delete', path: '/keys/{id}' },
        { method: 'post', path: '/tenants' },
      ]),
    );
    const missing = routes.filter(({ method, path }) => !doc.paths?.[path]?.[method]).map(({ method, path }) => `${method.toUpperCase()} ${path}`);
    expect(missing).toEqual([]);
  });

  it('documents at least one path under every sub-application mounted at a prefix', () => {
    const undocumented = mountedPrefixes(t).filter((prefix) => !Object.keys(doc.paths).some((p) => p === prefix || p.startsWith(`${prefix}/`)));
    expect(undocumented).toEqual([]);
  });

  it('documents the OAuth provider\'s own steps, which no Nest route serves', () => {
    expect(doc.paths['/auth/authorize/{uid}']?.get).toBeDefined();
    expect(doc.paths['/auth/logout/confirm']?.post).toBeDefined();
    expect(doc.paths['/auth/logout/success']?.get).toBeDefined();
  });

  it('documents the error envelope and bearer auth on protected operations', () => {
    const createKey = doc.paths['/keys'].post;
    expect(Object.keys(createKey.responses)).toEqual(expect.arrayContaining(['201', '400', '401', '403', '409', '429']));
    expect(JSON.stringify(createKey.responses['409'])).toContain('ErrorEnvelope');
    expect(createKey.security).toEqual(expect.arrayContaining([{ bearer: [] }, {}])); // {}: the bootstrap needs no auth
    expect(doc.components.securitySchemes.bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
  });

  /** Every operation of the document, with its method and path. */
  const operations = () =>
    Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, item]) =>
      Object.entries(item).filter(([method]) => ['get', 'head', 'put', 'post', 'delete', 'patch', 'options'].includes(method)).map(([method, op]) => ({ method, path, op })),
    );
  const schema = (name: string) => doc.components.schemas[name];

  it('documents Location on every 201 of a resource a GET reads back, Idempotency-Key on every POST that writes, and the tenant and connection reads', () => {
    const created = ['/items', '/types', '/edge-types', '/edges', '/keys', '/users', '/integrations', '/webhooks', '/blobs', '/tenants'];
    expect(created.filter((path) => !doc.paths[path].post.responses['201'].headers?.Location)).toEqual([]);
    const idempotent = operations()
      .filter(({ method, op }) => method === 'post' && (op.parameters ?? []).some((p: { in: string; name: string }) => p.in === 'header' && p.name === 'Idempotency-Key'))
      .map(({ path }) => path);
    expect(idempotent.sort()).toEqual(
      [
        '/items', '/items/bulk', '/items/bulk_action', '/items/{id}/versions/{version}/restore', '/keys', '/tenants', '/types', '/edge-types', '/edges', '/users', '/integrations',
        '/connections/{id}/refresh', '/webhooks', '/webhooks/{id}/secret', '/webhooks/{id}/deliveries/{delivery_id}/retry', '/auth/clients',
        '/auth/clients/{client_id}/secret',
      ].sort(),
    );
    for (const path of ['/tenants', '/tenants/{id}', '/connections/{id}']) expect(Object.keys(doc.paths[path].get.responses)).toEqual(expect.arrayContaining(['200', '401', '403']));
    expect(doc.paths['/tenants/{id}'].get.responses['404']).toBeDefined();
  });

  it('documents no request defaults that a PATCH would not apply', () => {
    for (const field of Object.values<any>(schema('UpdateKeyDto').properties)) expect(field.default).toBeUndefined();
    expect(schema('CreateKeyDto').properties.role.default).toBe('member');
    expect(schema('PatchItemDto').properties.tier.description ?? '').not.toMatch(/default/i);
    expect(schema('CreateItemDto').properties.tier.description).toMatch(/default_tier/);
  });

  /** The operations the service routes itself: not the provider's own (oidc/openapi-paths.ts), nor the HEADs beside their GETs. */
  const serviceOperations = () => {
    const provider = oidcOpenApiPaths();
    return operations().filter(({ method, path }) => !provider[path]?.[(method === 'head' ? 'get' : method) as 'get']);
  };
  const RATE_LIMIT_HEADERS = ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset'];

  it('documents 429 on every operation, with Retry-After and the rate-limit headers, in the form its route answers', () => {
    const missing = operations()
      .filter(({ op }) => !['Retry-After', ...RATE_LIMIT_HEADERS].every((h) => op.responses['429']?.headers?.[h]))
      .map(({ method, path }) => `${method} ${path}`);
    expect(missing).toEqual([]);
    const body = (method: string, path: string) => doc.paths[path][method].responses['429'].content['application/json'].schema;
    for (const [method, path] of [['post', '/auth/oauth2/token'], ['post', '/auth/device'], ['get', '/auth/userinfo']]) expect(body(method, path).properties.error.type).toBe('string');
    for (const [method, path] of [['get', '/health'], ['post', '/auth/sign-in'], ['get', '/openapi.json'], ['get', '/auth/oauth2/register/{client_id}']]) {
      expect(body(method, path).$ref).toBe('#/components/schemas/ErrorEnvelopeDto');
    }
  });

  it('describes each 429 in the form the running service sends it, and X-RateLimit-Reset as the Unix time it says', async () => {
    const reset = doc.components.headers['X-RateLimit-Reset'].description;
    expect(reset).toMatch(/Unix time/);
    expect(reset).not.toMatch(/seconds until/i);
    const limited = await startApp({ RATE_LIMIT_ENABLED: 'true', RATE_LIMIT_REQUESTS: '1' });
    try {
      for (const [method, url, path] of [
        ['post', '/auth/oauth2/token', '/auth/oauth2/token'],
        ['get', '/health', '/health'],
        ['get', '/auth/oauth2/register/x', '/auth/oauth2/register/{client_id}'],
      ]) {
        const send = () => (method === 'post' ? limited.http.post(url).type('form').send('a=b') : limited.http.get(url));
        let res = await send();
        for (let i = 0; i < 3 && res.status !== 429; i++) res = await send();
        expect([url, res.status]).toEqual([url, 429]);
        const oauthForm = !doc.paths[path][method].responses['429'].content['application/json'].schema.$ref;
        expect([url, typeof res.body.error]).toEqual([url, oauthForm ? 'string' : 'object']);
        const now = Date.now() / 1000;
        expect(Number(res.headers['x-ratelimit-reset'])).toBeGreaterThan(now - 1);
        expect(Number(res.headers['x-ratelimit-reset'])).toBeLessThan(now + 120);
      }
    } finally {
      await limited.close();
    }
  });

  it('documents Retry-After on every 503 service_unavailable', () => {
    const missing = operations()
      .filter(({ op }) => op.responses['503']?.content?.['application/json']?.schema?.$ref === '#/components/schemas/ErrorEnvelopeDto' && !op.responses['503'].headers?.['Retry-After'])
      .map(({ method, path }) => `${method} ${path}`);
    expect(operations().filter(({ op }) => op.responses['503']).length).toBeGreaterThan(0);
    expect(missing).toEqual([]);
  });

  it('says when the rate-limit headers are sent, and that every GET answers HEAD', async () => {
    expect(doc.info.description).not.toMatch(/Every response carries X-RateLimit/);
    expect(doc.info.description).toMatch(/RATE_LIMIT_ENABLED/);
    expect(doc.info.description).toMatch(/Every GET operation also answers HEAD/);
    for (const { path } of operations().filter(({ method, path }) => method === 'get' && !path.includes('{') && path !== '/events')) {
      const [get, head] = [await t.http.get(path).redirects(0), await t.http.head(path).redirects(0)];
      expect([path, head.status]).toEqual([path, get.status]);
      expect([path, Object.keys(doc.paths[path].head?.responses ?? {})]).toEqual([path, expect.arrayContaining([String(head.status)])]);
    }
  });

  it('states the length bounds of every body text field the service checks, as the check counts them', () => {
    const checked = [...((getMetadataStorage() as any).validationMetadatas as Map<Function, ValidationMetadata[]>).values()]
      .flat()
      .filter((m) => m.name === 'charLength' && doc.components.schemas[(m.target as Function).name]);
    expect(checked.length).toBeGreaterThan(20);
    for (const m of checked) {
      const [min, max] = m.constraints as [number, number];
      const property = doc.components.schemas[(m.target as Function).name].properties[m.propertyName];
      const bounded = m.each ? property.items : property;
      expect({ at: `${(m.target as Function).name}.${m.propertyName}`, maxLength: bounded.maxLength, minLength: bounded.minLength ?? 0 }).toEqual({
        at: `${(m.target as Function).name}.${m.propertyName}`,
        maxLength: max,
        minLength: min,
      });
    }
  });

  it('types whole numbers as integer, in bodies and in query parameters', () => {
    expect(schema('ItemResponse').properties.version.type).toBe('integer');
    expect(schema('ItemResponse').properties.schema_version.type).toBe('integer');
    expect(schema('PatchItemDto').properties.version.type).toBe('integer');
    expect(schema('TypeResponse').properties.version.type).toBe('integer');
    expect(schema('BulkJobDto').properties.processed.type).toBe('integer');
    const queryNumbers = operations().flatMap(({ op }) => (op.parameters ?? []).filter((p: any) => p.in === 'query' && ['limit', 'offset', 'before'].includes(p.name)));
    expect(queryNumbers.length).toBeGreaterThan(0);
    for (const p of queryNumbers) expect(p.schema.type).toBe('integer');
  });

  it('documents JSON errors as JSON, also on the event stream', () => {
    const events = doc.paths['/events'].get.responses;
    expect(Object.keys(events['200'].content)).toEqual(['text/event-stream']);
    for (const status of ['400', '401', '429']) expect(Object.keys(events[status].content)).toEqual(['application/json']);
  });

  it('lists 413 and 415 on every write the service routes itself, whatever body it documents', async () => {
    const writes = serviceOperations().filter(({ method }) => ['post', 'put', 'patch', 'delete'].includes(method));
    expect(writes.map(({ method, path }) => `${method} ${path}`)).toEqual(expect.arrayContaining(['delete /items/{id}', 'post /connections/{id}/refresh']));
    const missing = writes.filter(({ op }) => !op.responses['413'] || !op.responses['415']).map(({ method, path }) => `${method} ${path}`);
    expect(missing).toEqual([]);
    // As the running service answers: a body on a route that documents none is still read, and refused.
    const admin = (await rootAdmin()).key;
    const id = '00000000-0000-4000-8000-000000000001';
    const big = await t.http.delete(`/items/${id}`).set(bearer(admin)).type('json').send(JSON.stringify({ x: 'y'.repeat(1_100_000) }));
    expect([big.status, big.body.error?.code]).toEqual([413, 'invalid_request']);
    const text = await t.http.post(`/connections/${id}/refresh`).set(bearer(admin)).type('text').send('x');
    expect([text.status, text.body.error?.code]).toEqual([415, 'invalid_request']);
  });

  it('documents a 400 on every operation the service routes itself, in the form its route answers input it refuses', async () => {
    const missing = serviceOperations().filter(({ op }) => !op.responses['400']).map(({ method, path }) => `${method} ${path}`);
    expect(missing).toEqual([]);
    const notJson = serviceOperations()
      .filter(({ method, op }) => method !== 'head' && !op.responses['400'].content?.['application/json'])
      .map(({ method, path }) => `${method} ${path}`);
    expect(notJson).toEqual([]);
    // As the running service answers: an unknown query parameter, or a NUL where a route reads the query itself.
    for (const [url, path, form] of [
      ['/health?x=1', '/health', 'envelope'],
      ['/openapi.json?x=1', '/openapi.json', 'envelope'],
      ['/auth/sign-in?x=%00', '/auth/sign-in', 'envelope'],
      ['/auth/userinfo?x=%00', '/auth/userinfo', 'oauth'],
    ]) {
      const [get, head] = [await t.http.get(url).redirects(0), await t.http.head(url).redirects(0)];
      expect([url, get.status, head.status]).toEqual([url, 400, 400]);
      expect([url, Object.keys(doc.paths[path].get.responses)]).toEqual([url, expect.arrayContaining(['400'])]);
      expect([url, Object.keys(doc.paths[path].head.responses)]).toEqual([url, expect.arrayContaining(['400'])]);
      const documented = doc.paths[path].get.responses['400'].content['application/json'].schema;
      if (form === 'envelope') {
        expect([url, get.body.error?.code, documented.$ref]).toEqual([url, 'validation_error', '#/components/schemas/ErrorEnvelopeDto']);
      } else {
        expect([url, get.body.error, documented.properties?.error?.type]).toEqual([url, 'invalid_request', 'string']);
      }
    }
  });

  it('documents the 413 and 415 of a route that answers errors in RFC 6749 form in that form', async () => {
    const responses = doc.paths['/auth/oauth2/userinfo'].post.responses;
    const text = await t.http.post('/auth/oauth2/userinfo').type('text').send('x');
    const big = await t.http.post('/auth/oauth2/userinfo').type('form').send(`a=${'y'.repeat(1_100_000)}`);
    for (const res of [text, big]) {
      expect([res.status, res.body.error]).toEqual([res.status, 'invalid_request']);
      expect([res.status, responses[String(res.status)]?.content['application/json'].schema.properties?.error?.type]).toEqual([res.status, 'string']);
    }
    expect([text.status, big.status]).toEqual([415, 413]);
  });

  it('documents HEAD on every GET path: the GET\'s parameters, security and errors, no bodies, an operationId of its own', () => {
    const gets = Object.entries<Record<string, any>>(doc.paths).filter(([, item]) => item.get);
    expect(gets.filter(([, item]) => !item.head).map(([path]) => path)).toEqual([]);
    const errors = (op: any) => Object.keys(op.responses).filter((status) => /^[45]/.test(status)).sort();
    // The HEADs the document derives from their GETs (the blob download declares its own).
    for (const [path, { get, head }] of gets.filter(([, item]) => item.head.operationId === `${item.get.operationId}Head`)) {
      expect([path, head.parameters, head.security, head['x-error-format']]).toEqual([path, get.parameters, get.security, get['x-error-format']]);
      expect([path, errors(head)]).toEqual([path, errors(get)]);
      expect([path, Object.keys(head.responses).some((status) => /^[23]/.test(status))]).toEqual([path, true]);
      expect([path, Object.entries<any>(head.responses).filter(([, response]) => response.content).map(([status]) => status)]).toEqual([path, []]);
    }
    const ids = operations().map(({ op }) => op.operationId);
    expect(ids.filter((id, i) => ids.indexOf(id) !== i)).toEqual([]);
  });

  it('documents what an OPTIONS of a provider endpoint answers, preflight or not', async () => {
    const token = doc.paths['/auth/oauth2/token'].options.responses;
    const bare = await t.http.options('/auth/oauth2/token');
    const preflight = await t.http.options('/auth/oauth2/token').set('Origin', 'https://app.example').set('Access-Control-Request-Method', 'POST');
    expect([bare.status, preflight.status].filter((status) => !(String(status) in token))).toEqual([]);
  });

  it('documents the status a HEAD that does less than its GET answers (the connector callback: 200, not the GET\'s 302)', async () => {
    const status = (await t.http.head('/oauth/callback/x')).status;
    expect(Object.keys(doc.paths['/oauth/callback/{provider}'].head.responses)).toContain(String(status));
  });

  it('documents the JSON body of the connector\'s redirects, for callers that do not follow them', () => {
    for (const [path, field] of [['/oauth/start', 'authorize_url'], ['/oauth/callback/{provider}', 'redirect_to']]) {
      const schema = doc.paths[path].get.responses['302']?.content?.['application/json']?.schema;
      expect([path, schema?.required]).toEqual([path, [field]]);
    }
  });

  it('documents the blob upload\'s own 413 (blob_too_large), not the JSON body limit', () => {
    expect(doc.paths['/blobs'].post.responses['413'].description).toMatch(/blob_too_large/);
  });

  it('describes every response, and lists every tag it uses at the top level with a description', () => {
    const empty = operations().flatMap(({ method, path, op }) =>
      Object.entries<any>(op.responses)
        .filter(([, response]) => !response.description)
        .map(([status]) => `${method} ${path} ${status}`),
    );
    expect(empty).toEqual([]);
    const used = new Set([...operations().flatMap(({ op }) => op.tags ?? []), ...Object.values<any>(doc.webhooks).flatMap((item) => item.post.tags ?? [])]);
    const listed = new Map((doc.tags ?? []).map((tag: { name: string; description?: string }) => [tag.name, tag.description]));
    expect([...used].filter((tag) => !listed.get(tag))).toEqual([]);
  });

  it('documents the scope an invalid_scope token error names', () => {
    expect(doc.paths['/auth/oauth2/token'].post.responses['400'].content['application/json'].schema.properties.scope).toMatchObject({ type: 'string' });
  });

  it('states the limits the validators enforce, as they enforce them', () => {
    const accepts = (dto: new () => object, body: object) => validateSync(plainToInstance(dto, body)).length === 0;
    const tags = schema('CreateItemDto').properties.tags;
    expect(tags).toMatchObject({ maxItems: 100, items: { minLength: 1, maxLength: 100 } });
    const tag = new RegExp(tags.items.pattern, 'u');
    for (const sample of ['work', 'a b', 'x'.repeat(100), '😀'.repeat(100), '', ' work', 'work ', '\twork', 'a,b', ',', 'x'.repeat(101)]) {
      expect([sample, tag.test(sample)]).toEqual([sample, accepts(MetadataPatchDto, { tags: [sample] })]);
    }
    for (const [dto, field] of [['MetadataPatchDto', 'add_tags'], ['BulkActionDto', 'remove_tags'], ['BulkFilterDto', 'tags']]) {
      expect(schema(dto).properties[field].items.pattern).toBe(tags.items.pattern);
    }
    const source = new RegExp(schema('CreateKeyDto').properties.source.pattern, 'u');
    for (const sample of ['crm', 'crm:v2', 'a.b_c-d', 'x'.repeat(100), 'app:x', 'App:x', '-x', 'x'.repeat(101), 'a b']) {
      expect([sample, source.test(sample)]).toEqual([sample, accepts(CreateKeyDto, { source: sample })]);
    }
    for (const [dto, field] of [['CreateKeyDto', 'type_permissions'], ['UpdateKeyDto', 'edge_permissions'], ['RegisterClientDto', 'extension_permissions']]) {
      const map = schema(dto).properties[field];
      expect(map).toMatchObject({ maxProperties: 200, propertyNames: { maxLength: 200 } });
      const name = new RegExp(map.propertyNames.pattern, 'u');
      for (const sample of ['*', 'core.note', 'core.*', 'a-b_c.d', 'Core', 'core.', '.*', 'core.*.x']) expect([sample, name.test(sample)]).toEqual([sample, isPattern(sample)]);
    }
    for (const field of ['source_types', 'target_types']) expect(schema('CreateEdgeTypeDto').properties[field]).toMatchObject({ minItems: 1, maxItems: 50, items: { maxLength: 200 } });
    const client = schema('RegisterClientDto').properties;
    expect(client.redirect_uris).toMatchObject({ maxItems: 20, items: { maxLength: 2000 } });
    expect(client.post_logout_redirect_uris).toMatchObject({ maxItems: 20, items: { maxLength: 2000 } });
    expect(client.contacts).toMatchObject({ maxItems: 20, items: { maxLength: 320 } });
    expect(schema('CreateTypeDto').properties.name).toMatchObject({ maxLength: 200, pattern: expect.any(String) });
    expect(new RegExp(schema('CreateTypeDto').properties.name.pattern, 'u').test('acme.recipe')).toBe(true);
    expect(new RegExp(schema('CreateTypeDto').properties.name.pattern, 'u').test('Acme.recipe')).toBe(false);
  });

  it('publishes the manifest schema registration applies, oauth.client_id required, with the manifest itself required', () => {
    const register = schema('RegisterIntegrationDto');
    expect(register.required).toContain('manifest');
    expect(register.properties.manifest).toMatchObject(JSON.parse(JSON.stringify(MANIFEST_SCHEMA)));
    expect(register.properties.manifest).toMatchObject({
      additionalProperties: false,
      properties: { oauth: { additionalProperties: false, required: expect.arrayContaining(['client_id']), properties: { client_id: { type: 'string', minLength: 1 } } } },
    });
  });

  it('states the length limits of the integration and connector query parameters, as their validators enforce them', () => {
    const query = (path: string) => (doc.paths[path].get.parameters as any[]).filter((p) => p.in === 'query');
    const limits = (path: string) => Object.fromEntries(query(path).map((p) => [p.name, { required: p.required, ...p.schema }]));
    expect(limits('/oauth/start')).toMatchObject({
      integration_id: { required: true, minLength: 1, maxLength: 100 },
      redirect_uri: { required: true, minLength: 1, maxLength: 2000 },
    });
    // What the upstream sends back has no limit that refuses it (an over-long one is an error the user is sent on with), but the state and iss.
    const callback = limits('/oauth/callback/{provider}');
    expect(callback).toMatchObject({ state: { maxLength: 8000 }, iss: { maxLength: 2000 } });
    for (const name of ['code', 'error', 'error_description']) expect(callback[name]).not.toHaveProperty('maxLength');
    expect(limits('/integrations')).toMatchObject({ name: { minLength: 1, maxLength: 200 } });
    const accepts = (dto: new () => object, q: object) => validateSync(plainToInstance(dto, q)).length === 0;
    for (const [dto, path] of [[StartConnectionQuery, '/oauth/start'], [ConnectorCallbackQuery, '/oauth/callback/{provider}'], [ListIntegrationsQuery, '/integrations']] as const) {
      const valid = Object.fromEntries(query(path).filter((p) => p.required).map((p) => [p.name, 'x']));
      for (const p of query(path).filter((p) => p.schema.maxLength)) {
        const { minLength = 0, maxLength } = p.schema;
        const at = (length: number) => [p.name, length, accepts(dto, { ...valid, [p.name]: 'x'.repeat(length) })];
        expect([at(maxLength), at(maxLength + 1)]).toEqual([[p.name, maxLength, true], [p.name, maxLength + 1, false]]);
        if (minLength) expect([at(minLength), at(minLength - 1)]).toEqual([[p.name, minLength, true], [p.name, minLength - 1, false]]);
      }
    }
  });

  it('lists 413 and 415 on every operation that takes a JSON body', () => {
    const json = operations().filter(({ op }) => op.requestBody?.content?.['application/json'] && op['x-error-format'] !== 'oauth');
    expect(json.map(({ method, path }) => `${method} ${path}`)).toEqual(expect.arrayContaining(['post /items', 'patch /items/{id}', 'post /keys']));
    const missing = json.filter(({ op }) => !op.responses['413'] || !op.responses['415']).map(({ method, path }) => `${method} ${path}`);
    expect(missing).toEqual([]);
  });

  it('asks no bearer token of public routes, and the create-once secrets are required where they are returned', () => {
    expect(doc.paths['/oauth/callback/{provider}'].get.security ?? []).not.toContainEqual({ bearer: [] });
    expect(doc.paths['/connections'].get.security).toEqual([{ bearer: [] }]);
    const created = (path: string) => doc.paths[path].post.responses['201'].content['application/json'].schema.$ref.split('/').pop();
    expect(schema(created('/keys')).required).toContain('key');
    expect(schema(created('/webhooks')).required).toContain('secret');
    expect(schema('ApiKeyResponse').required ?? []).not.toContain('key');
  });

  it('gives every operation a unique operationId by one naming rule: lowerCamelCase, a verb then the resource, HEAD as its GET\'s plus Head', () => {
    const ids = operations().map(({ method, path, op }) => [`${method} ${path}`, op.operationId ?? '']);
    expect(ids.filter(([, id]) => !/^[a-z][A-Za-z0-9]*$/.test(id) || /Controller|_/.test(id))).toEqual([]);
    expect(ids.filter(([, id], i) => ids.findIndex(([, other]) => other === id) !== i)).toEqual([]);
    for (const [path, item] of Object.entries<any>(doc.paths)) if (item.get && path !== '/blobs/{hash}') expect([path, item.head.operationId]).toEqual([path, `${item.get.operationId}Head`]);
    const id = (method: string, path: string) => doc.paths[path][method].operationId;
    expect([id('post', '/items'), id('get', '/items'), id('patch', '/items/{id}'), id('delete', '/users/{id}'), id('post', '/webhooks/{id}/secret')]).toEqual(['createItem', 'listItems', 'patchItem', 'deleteUser', 'rotateWebhookSecret']);
    // DELETE /auth/grants/{id} ends an OAuth grant; the two paths of one handler get ids of their own.
    expect([id('delete', '/auth/grants/{id}'), id('get', '/auth/userinfo'), id('get', '/auth/oauth2/userinfo'), id('post', '/auth/authorize/decision'), id('post', '/auth/oauth2/consent')]).toEqual([
      'revokeGrant', 'getUserinfo', 'getOAuth2Userinfo', 'decideConsent', 'decideConsentOAuth2',
    ]);
    // Every id given explicitly is in use: one left behind by a renamed handler would silently stop applying.
    const used = new Set(ids.map(([, id]) => id));
    expect(Object.entries(OPERATION_IDS).filter(([, id]) => !used.has(id))).toEqual([]);
    expect(Object.values<any>(doc.webhooks).map((item) => item.post.operationId)).toContain('onItemCreated');
  });

  it('lists each path\'s operations under one tag', () => {
    const split = Object.entries<Record<string, any>>(doc.paths).filter(([, item]) => new Set(Object.values(item).map((op) => JSON.stringify(op.tags))).size > 1);
    expect(split.map(([path]) => path)).toEqual([]);
    expect(doc.paths['/auth/device'].get.tags).toEqual(doc.paths['/auth/device'].post.tags);
  });

  it('describes every event a webhook receives (OpenAPI 3.1 webhooks): its body, components that exist, and the signature headers', () => {
    expect(Object.keys(doc.webhooks).sort()).toEqual([...EVENT_NAMES].sort());
    for (const [name, item] of Object.entries<any>(doc.webhooks)) {
      const schema = item.post.requestBody.content['application/json'].schema;
      expect(schema.properties.event.enum).toEqual([name]);
      const subject = schema.required.find((f: string) => f !== 'event');
      expect(doc.components.schemas[schema.properties[subject].$ref.split('/').pop()]).toBeDefined();
      const headers = item.post.parameters.map((p: { name: string }) => p.name);
      expect(headers).toEqual(expect.arrayContaining(['X-Svc-Event-Id', 'X-Svc-Delivery-Id', 'X-Svc-Signature', 'webhook-id', 'webhook-timestamp', 'webhook-signature']));
    }
    expect(doc.webhooks['item.created'].post.requestBody.content['application/json'].schema.properties.item.$ref).toBe('#/components/schemas/ItemResponse');
  });

  it('describes the OAuth provider as security schemes: the URLs its discovery advertises, the scopes of SPEC 5.4, and the account pages\' cookie', async () => {
    const discovery = (await t.http.get('/.well-known/openid-configuration').expect(200)).body;
    const { oauth2, openIdConnect, account_session: cookie } = doc.components.securitySchemes;
    expect(oauth2.flows.authorizationCode).toMatchObject({ authorizationUrl: discovery.authorization_endpoint, tokenUrl: discovery.token_endpoint, refreshUrl: discovery.token_endpoint });
    expect(oauth2.flows.clientCredentials.tokenUrl).toBe(discovery.token_endpoint);
    expect(Object.keys(oauth2.flows.authorizationCode.scopes)).toEqual(
      expect.arrayContaining(['<type>:read', '<type>:write', '*:read', 'edge.<type>:read', 'edge.<type>:write', 'metadata:read', 'metadata:write', 'metadata.types:write', 'openid', 'profile', 'email']),
    );
    expect(Object.keys(oauth2.flows.clientCredentials.scopes)).not.toContain('openid');
    expect(oauth2.description).toMatch(/`<type>`.*type pattern/);
    expect(openIdConnect.openIdConnectUrl).toBe(`${discovery.issuer}/.well-known/openid-configuration`);
    expect(cookie).toMatchObject({ type: 'apiKey', in: 'cookie', name: 'svc_account' });
    // Every operation says who may call it (security: [] for anyone), by schemes that exist, with scopes the scheme lists.
    const undefinedScheme: string[] = [];
    for (const { method, path, op } of operations()) {
      if (!Array.isArray(op.security)) undefinedScheme.push(`${method} ${path}: no security`);
      for (const requirement of op.security ?? []) {
        for (const [name, scopes] of Object.entries<string[]>(requirement)) {
          if (!doc.components.securitySchemes[name]) undefinedScheme.push(`${method} ${path}: ${name}`);
          if (name === 'oauth2') undefinedScheme.push(...scopes.filter((scope) => !(scope in oauth2.flows.authorizationCode.scopes)).map((scope) => `${method} ${path}: ${scope}`));
        }
      }
    }
    expect(undefinedScheme).toEqual([]);
    for (const item of Object.values<any>(doc.webhooks)) expect(item.post.security).toEqual([]);
  });

  it('offers OAuth access tokens where the guards take them, with the scopes they need; the account pages\' cookie where it signs in', async () => {
    const security = (method: string, path: string) => doc.paths[path][method].security;
    expect(security('post', '/types')).toEqual([{ bearer: [] }, { oauth2: ['metadata.types:write', '<type>:read'] }]);
    expect(security('post', '/edges')).toEqual([{ bearer: [] }, { oauth2: ['edge.<type>:write', '<type>:write'] }]);
    expect(security('get', '/items/{id}')).toEqual([{ bearer: [] }, { oauth2: ['<type>:read'] }]);
    expect(security('get', '/items')).toEqual([{ bearer: [] }, { oauth2: [] }]);
    expect(doc.paths['/items'].get.description).toMatch(/OAuth access tokens: .*metadata:read/);
    expect(security('get', '/keys')).toEqual([{ bearer: [] }]);
    expect(security('post', '/keys')).toEqual([{ bearer: [] }, {}]);
    for (const [method, path] of [['get', '/health'], ['get', '/openapi.json'], ['post', '/auth/oauth2/register'], ['get', '/auth/sign-in'], ['get', '/.well-known/openid-configuration']]) expect([path, security(method, path)]).toEqual([path, []]);
    for (const [method, path] of [['get', '/auth/grants'], ['get', '/auth/grants/{id}'], ['delete', '/auth/grants/{id}'], ['post', '/auth/grants/{id}/revoke'], ['get', '/auth/sessions'], ['post', '/auth/sessions/revoke']]) {
      expect([path, security(method, path)]).toEqual([path, [{ account_session: [] }]]);
    }
    expect(security('get', '/auth/userinfo')).toEqual([{ oauth2: ['openid'] }, { openIdConnect: ['openid'] }]);
    // As the guards answer a client-credentials token with one item scope: they decide before a route reads its query,
    // so a GET is 403 exactly where the document offers no OAuth.
    const admin = (await rootAdmin()).key;
    const client = (await t.http.post('/auth/clients').set(bearer(admin)).send({ client_name: 'Document check', grant_types: ['client_credentials'], scope: 'core.note:read' }).expect(201)).body;
    const token = (await t.http.post('/auth/oauth2/token').auth(client.client_id, client.client_secret).type('form').send({ grant_type: 'client_credentials', scope: 'core.note:read' }).expect(200)).body.access_token;
    const gets = operations().filter(({ method, path, op }) => method === 'get' && !path.includes('{') && path !== '/events' && op.security.some((r: object) => 'bearer' in r));
    expect(gets.length).toBeGreaterThan(10);
    for (const { path, op } of gets) {
      const status = (await t.http.get(path).set(bearer(token)).redirects(0)).status;
      expect([path, status === 403]).toEqual([path, !op.security.some((r: object) => 'oauth2' in r)]);
    }
    // A scope its requirement names is needed: this token has no metadata.types:write.
    expectError(await t.http.post('/types').set(bearer(token)).send({ name: 'acme.nothing', schema: { type: 'object' } }), 403, 'forbidden');
  });

  it('closes the request bodies that the validation pipeline closes, free-form members left open: the document refuses what the server refuses', async () => {
    const admin = await rootAdmin();
    const closed = serviceOperations().flatMap(({ method, path, op }) => {
      const ref = op.requestBody?.content?.['application/json']?.schema?.$ref;
      return ref ? [[`${method} ${path}`, schema(ref.split('/').pop()).additionalProperties]] : [];
    });
    expect(closed.length).toBeGreaterThan(15);
    expect(closed.filter(([, additional]) => additional !== false)).toEqual([]);
    for (const nested of ['BulkFilterDto', 'CreateItemDto']) expect(schema(nested).additionalProperties).toBe(false);
    const note = (await t.http.post('/items').set(bearer(admin.key)).send({ type: 'core.note', properties: { title: 'to patch' } }).expect(201)).body;
    const cases: Array<[method: 'post' | 'patch', url: string, path: string, body: Record<string, unknown>, unknown?: string]> = [
      ['post', '/items', '/items', { type: 'core.note', properties: { title: 'free-form', anything: { nested: [1] } }, extensions: { 'acme.x': { y: 1 } } }],
      ['post', '/items', '/items', { type: 'core.note', properties: { title: 'x' }, colour: 'red' }, 'colour'],
      ['patch', `/items/${note.id}`, '/items/{id}', { version: 1, properties: { title: 'patched', extra: { a: 1 } }, extensions: { 'acme.x': null } }],
      ['patch', `/items/${note.id}`, '/items/{id}', { version: 2, title: 'not a field' }, 'title'],
      ['patch', `/items/${note.id}/metadata`, '/items/{id}/metadata', { add_tags: ['x'], extensions: { 'acme.y': { z: [] } } }],
      ['post', '/items/bulk_action', '/items/bulk_action', { action: 'update_tags', filter: { type: 'core.note' }, add_tags: ['x'], dry_run: true }],
      ['post', '/items/bulk_action', '/items/bulk_action', { action: 'update_tags', filter: { type: 'core.note', colour: 'red' }, add_tags: ['x'], dry_run: true }, 'filter.colour'],
      ['post', '/types', '/types', { name: 'acme.recipe', schema: { type: 'object', properties: { title: { type: 'string' } }, 'x-anything': true } }],
      ['post', '/types', '/types', { name: 'acme.other', schema: { type: 'object' }, colour: 'red' }, 'colour'],
      ['patch', `/keys/${admin.id}`, '/keys/{id}', { label: 'root', scope: 'everything' }, 'scope'],
      ['post', '/webhooks', '/webhooks', { url: 'https://hooks.example/in', events: ['item.created'], headers: {} }, 'headers'],
    ];
    for (const [method, url, path, body, unknown] of cases) {
      const res = await t.http[method](url).set(bearer(admin.key)).send(body);
      if (unknown) expect([url, badFields(res)]).toEqual([url, [unknown]]);
      else expect([url, res.status, res.status < 300]).toEqual([url, res.status, true]);
      const documented = matches(json(doc.paths[path][method].requestBody), body);
      expect([url, body, documented === true]).toEqual([url, body, !unknown]);
    }
  });

  it('requires a JSON request body exactly where its schema has a required field, as the server answers a request without one', async () => {
    const admin = await rootAdmin();
    const bodies = serviceOperations().flatMap(({ method, path, op }) => {
      const ref = op.requestBody?.content?.['application/json']?.schema?.$ref;
      return ref && Object.keys(op.requestBody.content).length === 1 ? [[`${method} ${path}`, op.requestBody.required === true, (schema(ref.split('/').pop()).required ?? []).length > 0]] : [];
    });
    expect(bodies.length).toBeGreaterThan(15);
    expect(bodies.filter(([, required, hasRequiredField]) => required !== hasRequiredField)).toEqual([]);
    const required = (method: string, path: string) => doc.paths[path][method].requestBody.required;
    expect([required('post', '/items'), required('patch', '/items/{id}'), required('post', '/webhooks')]).toEqual([true, true, true]);
    expect([required('post', '/keys'), required('patch', '/webhooks/{id}'), required('post', '/webhooks/{id}/secret'), required('patch', '/items/{id}/metadata')]).toEqual([false, false, false, false]);
    // The server takes a missing body as {} where the document says so, and names the missing field where it does not.
    const note = (await t.http.post('/items').set(bearer(admin.key)).send({ type: 'core.note', properties: { title: 'no body' } }).expect(201)).body;
    const hook = (await t.http.post('/webhooks').set(bearer(admin.key)).send({ url: 'https://93.184.216.34/hooks', events: ['item.created'] }).expect(201)).body;
    for (const [method, url] of [['post', '/keys'], ['patch', `/webhooks/${hook.id}`], ['post', `/webhooks/${hook.id}/secret`], ['patch', `/items/${note.id}/metadata`]] as const) {
      const res = await t.http[method](url).set(bearer(admin.key));
      expect([url, res.status < 300]).toEqual([url, true]);
    }
    const noType = expectError(await t.http.post('/items').set(bearer(admin.key)), 400, 'validation_error');
    expect(noType.details!.fields).toEqual(expect.arrayContaining([{ field: 'type', message: 'is required' }]));
  });

  it('types the provider\'s registration, token, userinfo and account answers as the service sends them', async () => {
    const discovery = (await t.http.get('/.well-known/openid-configuration').expect(200)).body;
    const grantTypes = doc.paths['/auth/oauth2/token'].post.requestBody.content['application/x-www-form-urlencoded'].schema.properties.grant_type;
    expect([...grantTypes.enum].sort()).toEqual([...discovery.grant_types_supported].sort());
    // RFC 7591 / 7592: open registration, and the client's read with its registration_access_token.
    const metadata = { client_name: 'Registered', redirect_uris: ['http://127.0.0.1/cb'], scope: 'openid profile email core.note:read', token_endpoint_auth_method: 'none' };
    expect(matches(json(doc.paths['/auth/oauth2/register'].post.requestBody), metadata)).toBe(true);
    const registered = await t.http.post('/auth/oauth2/register').send(metadata).expect(201);
    expect(matches(json(doc.paths['/auth/oauth2/register'].post.responses['201']), registered.body)).toBe(true);
    expect(registered.headers['cache-control']).toBe('no-store');
    const read = await t.http.get(new URL(registered.body.registration_client_uri).pathname).set(bearer(registered.body.registration_access_token)).expect(200);
    expect(matches(json(doc.paths['/auth/oauth2/register/{client_id}'].get.responses['200']), read.body)).toBe(true);
    expect(schema('DynamicClient').required).toEqual(expect.arrayContaining(['registration_access_token', 'registration_client_uri']));
    // A user consents in the browser; the tokens, the claims, and the account pages' JSON.
    const admin = (await rootAdmin()).key;
    const user = { email: 'doc@example.com', password: 'correct horse battery', name: 'Doc User', picture: 'https://pictures.example/doc.png' };
    await t.http.post('/users').set(bearer(admin)).send(user).expect(201);
    const agent = request.agent(t.url);
    const verifier = 'v'.repeat(43);
    const challenge = createHash('sha256').update(verifier).digest('base64url');
    const query = new URLSearchParams({ response_type: 'code', client_id: registered.body.client_id, redirect_uri: metadata.redirect_uris[0], scope: metadata.scope, state: 's1', code_challenge: challenge, code_challenge_method: 'S256' });
    const signIn = await browse(agent, t.url, `/auth/authorize?${query}`);
    const signedIn = await agent.post('/auth/sign-in').type('form').send({ uid: field(signIn.page!, 'uid'), csrf: field(signIn.page!, 'csrf'), email: user.email, password: user.password }).expect(303);
    const consent = await browse(agent, t.url, new URL(signedIn.headers.location, t.url).pathname + new URL(signedIn.headers.location, t.url).search);
    const decided = await agent.post('/auth/authorize/decision').type('form').send({ uid: field(consent.page!, 'uid'), csrf: field(consent.page!, 'csrf'), decision: 'approve' }).expect(303);
    const back = await browse(agent, t.url, new URL(decided.headers.location, t.url).pathname);
    const code = new URL(back.leftTo!).searchParams.get('code')!;
    const tokens = await t.http.post('/auth/oauth2/token').type('form').send({ grant_type: 'authorization_code', code, redirect_uri: metadata.redirect_uris[0], code_verifier: verifier, client_id: registered.body.client_id }).expect(200);
    expect(matches(json(doc.paths['/auth/oauth2/token'].post.responses['200']), tokens.body)).toBe(true);
    const claims = await t.http.get('/auth/userinfo').set(bearer(tokens.body.access_token)).expect(200);
    expect([tokens.headers['cache-control'], claims.headers['cache-control']]).toEqual(['no-store', 'no-store']);
    expect(claims.body).toEqual({ sub: expect.any(String), name: user.name, preferred_username: user.email, picture: user.picture, email: user.email, email_verified: false });
    expect(Object.keys(claims.body).filter((claim) => !(claim in schema('UserinfoClaims').properties))).toEqual([]);
    expect(matches(json(doc.paths['/auth/userinfo'].get.responses['200']), claims.body)).toBe(true);
    const account = request.agent(t.url);
    const form = await account.get('/auth/sign-in?return_to=/auth/grants').expect(200);
    await account.post('/auth/sign-in').type('form').send({ return_to: '/auth/grants', csrf: field(form.text, 'csrf'), email: user.email, password: user.password }).expect(303);
    const grants = await account.get('/auth/grants').set('Accept', 'application/json').expect(200);
    expect(grants.body.grants).toHaveLength(1);
    expect(matches(json(doc.paths['/auth/grants'].get.responses['200']), grants.body)).toBe(true);
    const grant = await account.get(`/auth/grants/${grants.body.grants[0].id}`).expect(200);
    expect(matches(json(doc.paths['/auth/grants/{id}'].get.responses['200']), grant.body)).toBe(true);
    const sessions = await account.get('/auth/sessions').set('Accept', 'application/json').expect(200);
    expect(sessions.body.sessions).toHaveLength(1);
    expect(matches(json(doc.paths['/auth/sessions'].get.responses['200']), sessions.body)).toBe(true);
    for (const name of ['AccountGrant', 'AccountSession']) expect([name, schema(name).additionalProperties]).toEqual([name, undefined]);
  });

  it('documents PATCH /items/{id}\'s 409 as either its version_conflict or the pipeline\'s conflict, and every error code as one of SPEC 7\'s', async () => {
    const admin = (await rootAdmin()).key;
    const conflict = json(doc.paths['/items/{id}'].patch.responses['409']);
    const item = (await t.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title: 'one' } }).expect(201)).body;
    await t.http.patch(`/items/${item.id}`).set(bearer(admin)).send({ version: 1, properties: { title: 'two' } }).expect(200);
    const stale = await t.http.patch(`/items/${item.id}`).set(bearer(admin)).send({ version: 1, properties: { title: 'three' } });
    expectError(stale, 409, 'version_conflict');
    expect(matches(conflict, stale.body)).toBe(true);
    expect(matches(conflict, { error: { code: 'conflict', message: 'The request collided with concurrent writes and changed nothing; send it again' } })).toBe(true);
    expect(matches(conflict, { error: { code: 'no_such_code', message: 'x' } })).not.toBe(true);
    expect(doc.paths['/items/{id}'].patch.responses['409'].description).toMatch(/version_conflict.*Or: .*conflict/);
    const codes = schema('ErrorEnvelopeDto').properties.error.$ref ? schema(schema('ErrorEnvelopeDto').properties.error.$ref.split('/').pop()).properties.code.enum : undefined;
    expect(codes).toEqual(expect.arrayContaining(['validation_error', 'version_conflict', 'rate_limited', 'internal_error', 'service_unavailable', 'upstream_unavailable']));
    expect(matches(json(doc.paths['/items'].get.responses['401']), (await t.http.get('/items').set(bearer('svc_k1_nope'))).body)).toBe(true);
  });

  it('gives every timestamp of the document format date-time, and the answers match it', async () => {
    const untyped = Object.entries<any>(doc.components.schemas).flatMap(([name, s]) =>
      Object.entries<any>(s.properties ?? {})
        .filter(([property, p]) => /_at$/.test(property) && [p.type].flat().includes('string') && p.format !== 'date-time')
        .map(([property]) => `${name}.${property}`),
    );
    expect(untyped).toEqual([]);
    const admin = (await rootAdmin()).key;
    const keys = await t.http.get('/keys').set(bearer(admin)).expect(200);
    expect(matches(json(doc.paths['/keys'].get.responses['200']), keys.body)).toBe(true);
    const types = await t.http.get('/types').set(bearer(admin)).expect(200);
    expect(matches(json(doc.paths['/types'].get.responses['200']), types.body)).toBe(true);
  });

  it('documents the headers the pipeline sends: X-Request-Id (which a caller may choose), WWW-Authenticate on a 401, and those of the blob 304 and the connector\'s 302', async () => {
    const missing = operations().flatMap(({ method, path, op }) => [
      ...(op.parameters.some((p: { name: string; in: string }) => p.name === 'X-Request-Id' && p.in === 'header') ? [] : [`${method} ${path}: no X-Request-Id parameter`]),
      ...Object.entries<any>(op.responses).filter(([, response]) => !response.headers?.['X-Request-Id']).map(([status]) => `${method} ${path} ${status}`),
      ...(op.responses['401'] && !op.responses['401'].headers['WWW-Authenticate'] ? [`${method} ${path} 401: no WWW-Authenticate`] : []),
    ]);
    expect(missing).toEqual([]);
    // The pattern the document gives a caller's id is the one the service keeps.
    const pattern = new RegExp(/`([^`]+)`/.exec(doc.paths['/health'].get.parameters.find((p: { name: string }) => p.name === 'X-Request-Id').description)![1]);
    for (const id of ['trace-1.a_B', 'x'.repeat(100), 'x'.repeat(101), 'with space', 'semi;colon']) {
      const echoed = (await t.http.get('/health').set('X-Request-Id', id)).headers['x-request-id'];
      expect([id, echoed === id]).toEqual([id, pattern.test(id)]);
    }
    const unauthorized = await t.http.get('/items');
    expect(unauthorized.headers['www-authenticate']).toBe('Bearer realm="svc"');
    const admin = (await rootAdmin()).key;
    const blob = (await t.http.post('/blobs').set(bearer(admin)).type('application/octet-stream').send(Buffer.from('cached bytes')).expect(201)).body;
    const notModified = await t.http.get(`/blobs/${blob.hash}`).set(bearer(admin)).set('If-None-Match', `"${blob.hash}"`).expect(304);
    const documented = Object.keys(doc.paths['/blobs/{hash}'].get.responses['304'].headers).map((h) => h.toLowerCase());
    for (const sent of ['etag', 'cache-control', 'content-security-policy']) expect([sent, notModified.headers[sent] !== undefined, documented.includes(sent)]).toEqual([sent, true, true]);
    for (const path of ['/oauth/start', '/oauth/callback/{provider}']) expect(Object.keys(doc.paths[path].get.responses['302'].headers)).toEqual(expect.arrayContaining(['Location', 'Cache-Control']));
    for (const [method, path, status] of [['post', '/auth/oauth2/token', '200'], ['post', '/auth/oauth2/introspect', '200'], ['post', '/auth/oauth2/register', '201'], ['get', '/auth/oauth2/register/{client_id}', '200'], ['get', '/auth/userinfo', '200']]) {
      expect([path, doc.paths[path][method].responses[status].headers['Cache-Control']]).toEqual([path, { $ref: '#/components/headers/Cache-Control' }]);
    }
  });

  it('is the same document, byte for byte, from another start of the service', async () => {
    const again = await startApp();
    try {
      const other = (await again.http.get('/openapi.json').expect(200)).text;
      const ours = (await t.http.get('/openapi.json').expect(200)).text;
      expect(other.replaceAll(again.url, t.url)).toBe(ours);
    } finally {
      await again.close();
    }
  });

  it('serves the browsable reference and all of its assets itself', async () => {
    for (const page of ['/docs', '/docs/']) {
      const res = await t.http.get(page).expect(200);
      expect(res.headers['content-type']).toMatch(/^text\/html/);
      const refs = [...res.text.matchAll(/<(?:script[^>]*\ssrc|link[^>]*\shref)="([^"]+)"/g)].map((m) => m[1]);
      const scripts = refs.filter((r) => r.endsWith('.js'));
      const styles = refs.filter((r) => r.endsWith('.css'));
      expect(scripts.length).toBeGreaterThan(0);
      expect(styles.length).toBeGreaterThan(0);
      for (const ref of refs) {
        const url = new URL(ref, `${t.url}${page}`);
        expect(url.origin).toBe(t.url); // no CDN
        const asset = await t.http.get(url.pathname).buffer(true).parse((r, cb) => {
          r.on('data', () => undefined);
          r.on('end', () => cb(null, null));
        });
        expect([url.pathname, asset.status]).toEqual([url.pathname, 200]);
        const type = asset.headers['content-type'];
        if (ref.endsWith('.js')) expect(type).toMatch(/javascript/);
        else if (ref.endsWith('.css')) expect(type).toMatch(/^text\/css/);
        else if (ref.endsWith('.png')) expect(type).toMatch(/^image\/png/);
      }
    }
  });
});
