/** CONTRACT: GET /openapi.json (OpenAPI 3.1.0, info.version 4.2.0) lists every route; /docs works offline. */
import { EVENT_NAMES } from '../src/events/event-catalogue';
import { startApp, TestApp } from './support/app';

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
    // HEAD beside GET is Fastify's automatic sibling route (exposeHeadRoutes), not an endpoint of its own.
    for (const method of methods) if (!(method === 'head' && methods.includes('get'))) out.push({ method, path });
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

  it('is OpenAPI 3.1.0 at version 4.2.0', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info.version).toBe('4.2.0');
    expect(typeof doc.info.title).toBe('string');
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
      Object.entries(item).filter(([method]) => ['get', 'put', 'post', 'delete', 'patch'].includes(method)).map(([method, op]) => ({ method, path, op })),
    );
  const schema = (name: string) => doc.components.schemas[name];

  it('documents no request defaults that a PATCH would not apply', () => {
    for (const field of Object.values<any>(schema('UpdateKeyDto').properties)) expect(field.default).toBeUndefined();
    expect(schema('CreateKeyDto').properties.role.default).toBe('member');
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

  it('gives every operation an operationId usable as an identifier', () => {
    const bad = operations().filter(({ op }) => !/^[A-Za-z_][A-Za-z0-9_]*$/.test(op.operationId ?? '')).map(({ method, path }) => `${method} ${path}`);
    expect(bad).toEqual([]);
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
