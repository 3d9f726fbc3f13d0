/** The provider's own HTML (its self-submitting forms), made the service's: never framed, drawn as the service's page. */
import type { KoaContextWithOIDC } from 'oidc-provider';
import { SELF_SUBMITTING_CSP, selfSubmittingPage } from './pages';
import { setPage } from './send-page';

/**
 * The provider's own HTML (the self-submitting forms of `response_mode=form_post` and of a logout
 * without a session) comes without the pages' headers (send-page.ts): it is not to be framed either.
 */
export async function neverFramed(ctx: KoaContextWithOIDC, next: () => Promise<void>): Promise<void> {
  await next();
  if (!ctx.response.is('html') || ctx.response.get('X-Frame-Options')) return;
  ctx.set('X-Frame-Options', 'DENY');
  if (!ctx.response.get('Content-Security-Policy')) ctx.set('Content-Security-Policy', "frame-ancestors 'none'");
}

/** oidc-provider's self-submitting form (lib/response_modes/form_post.js of the pinned version): its target and fields. */
const PROVIDER_FORM_POST = /^<!DOCTYPE html>\s*<html>\s*<head>[\s\S]*<title>Submitting Callback<\/title>[\s\S]*<form method="post" action="([^"]*)">([\s\S]*?)<noscript>/;
const PROVIDER_HIDDEN_FIELD = /<input type="hidden" name="([^"]*)" value="([^"]*)"\/>/g;
const unescapeHtml = (text: string) => text.replace(/&(lt|gt|quot|#39|amp);/g, (_, e: string) => ({ lt: '<', gt: '>', quot: '"', '#39': "'", amp: '&' })[e]!);

/**
 * The provider writes its self-submitting form (the `form_post` answer to an app, the confirmation
 * of a logout without a session, the sign-out before a sign-in as another user) itself, with no
 * option to replace it, and without the pages' language, viewport or `<main>` (WCAG 3.1.1). It is
 * drawn again as the service's page, with the same target and fields, under the pages' CSP but for
 * its one script. A body not of that shape is left alone.
 */
export async function ownSelfSubmittingForms(ctx: KoaContextWithOIDC, next: () => Promise<void>): Promise<void> {
  await next();
  if (typeof ctx.body !== 'string' || !ctx.response.is('html')) return;
  const form = PROVIDER_FORM_POST.exec(ctx.body);
  if (!form) return;
  const fields = [...form[2].matchAll(PROVIDER_HIDDEN_FIELD)].map((f) => [unescapeHtml(f[1]), unescapeHtml(f[2])] as const);
  const status = ctx.status;
  setPage(ctx, selfSubmittingPage(unescapeHtml(form[1]), fields));
  ctx.set('Content-Security-Policy', SELF_SUBMITTING_CSP);
  ctx.status = status;
}
