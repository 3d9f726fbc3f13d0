/** CONTRACT: GET /openapi.json (OpenAPI 3.1.0, info.version 4.2.0) lists every route; /docs works offline. */
import { startApp, TestApp } from './support/app';

interface ExpressLayer {
  route?: { path: string | string[]; methods: Record<string, boolean> };
  /** The mount path of app.use() middleware (Express 5). */
  rawPath?: string;
}

function expressStack(t: TestApp): ExpressLayer[] {
  return (t.app.getHttpAdapter().getInstance() as { router: { stack: ExpressLayer[] } }).router.stack;
}

/** Sub-applications mounted with app.use('/prefix', ...) (an OAuth provider, say): their prefixes. */
function mountedPrefixes(t: TestApp): string[] {
  return expressStack(t)
    .filter((l) => !l.route && typeof l.rawPath === 'string' && l.rawPath !== '/' && !l.rawPath.startsWith('/docs'))
    .map((l) => l.rawPath!);
}

/** Every (method, path) the running Express app routes to a handler, in OpenAPI path syntax. */
function registeredRoutes(t: TestApp): Array<{ method: string; path: string }> {
  const out: Array<{ method: string; path: string }> = [];
  for (const layer of expressStack(t)) {
    if (!layer.route) continue; // app.use() middleware
    const methods = Object.keys(layer.route.methods).filter((m) => layer.route!.methods[m] && m !== '_all');
    // Middleware bound to every method (`all`) is pipeline plumbing, not an endpoint.
    if (methods.length > 10 || layer.route.methods._all) continue;
    for (const raw of ([] as string[]).concat(layer.route.path)) {
      if (raw === '/openapi.json' || raw === '/docs' || raw.startsWith('/docs/')) continue;
      const path = raw.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
      for (const method of methods) out.push({ method, path });
    }
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

  it('documents the error envelope and bearer auth on protected operations', () => {
    const createKey = doc.paths['/keys'].post;
    expect(Object.keys(createKey.responses)).toEqual(expect.arrayContaining(['201', '400', '401', '403', '409', '429']));
    expect(JSON.stringify(createKey.responses['409'])).toContain('ErrorEnvelope');
    expect(createKey.security).toEqual([{ bearer: [] }]);
    expect(doc.components.securitySchemes.bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
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
