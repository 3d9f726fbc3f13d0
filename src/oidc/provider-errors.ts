/**
 * The provider's errors as the service answers them: its error page for a browser, the OAuth
 * error JSON otherwise, 503 `temporarily_unavailable` while a dependency is away, and errors no
 * route's error handling answered.
 */
import type { KoaContextWithOIDC } from 'oidc-provider';
import { isDatabaseTrouble, UNAVAILABLE_RETRY_AFTER_SECONDS } from '../common/unavailable';
import { providerErrorPage } from './pages';
import { setPage } from './send-page';

/**
 * A dependency away (PostgreSQL or Redis), or a statement PostgreSQL cancelled at its timeout
 * (isDatabaseTrouble), while the provider answered, which it would answer 500 `server_error`:
 * 503 with Retry-After, as the API answers
 * `service_unavailable`, in the endpoint's error form, `temporarily_unavailable` (RFC 6749
 * 4.1.2.1's name for it): the error page for a browser, the OAuth error JSON otherwise.
 */
export function answerUnavailable(ctx: KoaContextWithOIDC): Promise<void> | void {
  ctx.status = 503;
  ctx.set('Retry-After', UNAVAILABLE_RETRY_AFTER_SECONDS);
  const out = { error: 'temporarily_unavailable', error_description: 'The service\'s database is unavailable or did not answer in time; retry after Retry-After' };
  if (ctx.accepts('json', 'html') === 'html') return renderError(ctx, out);
  ctx.set('Cache-Control', 'no-store');
  ctx.body = out;
}

/** The provider's error page (its routes' error handling renders it for a browser; so does answerLateErrors). */
export async function renderError(ctx: KoaContextWithOIDC, out: { error: string; error_description?: string }): Promise<void> {
  setPage(ctx, providerErrorPage(String(out.error), out.error_description));
}

/**
 * An error no route's error handling answered: one thrown after it, such as by the session save
 * oidc-provider runs once more after the route (ensureSessionSave in lib/helpers/initialize_app.js)
 * when the adapter refuses what the session holds, or by a middleware outside the routes. Koa's
 * default would strip every header, the service's (security headers, request id: oidc-mount.ts
 * passes them on) included, and answer in plain text. Answered instead as the routes answer an
 * error: the error page for a browser, the OAuth error JSON otherwise, with the headers the
 * response had before the provider took it; those set since (the failed route's cookies, its
 * page's headers) are dropped, as Koa would drop them. Registered first, so it wraps the rest.
 */
export async function answerLateErrors(ctx: KoaContextWithOIDC, next: () => Promise<void>): Promise<void> {
  const before = new Set(Object.keys(ctx.response.headers));
  try {
    await next();
  } catch (err) {
    if (ctx.headerSent || !ctx.writable) throw err;
    if (isDatabaseTrouble(err)) {
      for (const name of Object.keys(ctx.response.headers)) if (!before.has(name)) ctx.remove(name);
      return answerUnavailable(ctx);
    }
    const e = err as { expose?: unknown; statusCode?: unknown; message?: unknown; error_description?: unknown };
    const status = typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500 ? e.statusCode : undefined;
    const exposed = e.expose === true && status !== undefined && typeof e.message === 'string';
    for (const name of Object.keys(ctx.response.headers)) if (!before.has(name)) ctx.remove(name);
    const out = exposed
      ? { error: e.message as string, ...(typeof e.error_description === 'string' ? { error_description: e.error_description } : {}) }
      : { error: 'server_error', error_description: 'oops! something went wrong' };
    ctx.status = exposed ? status : 500;
    // Reported as Koa reports an unhandled error (its default logs it).
    if (!exposed) ctx.app.emit('error', err, ctx);
    if (ctx.accepts('json', 'html') === 'html') return renderError(ctx, out);
    ctx.set('Cache-Control', 'no-store');
    ctx.body = out;
  }
}
