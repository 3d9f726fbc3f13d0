/** The bodies of the provider's POST endpoints, read by the API's rules (body-parsing.ts) before the provider parses them. */
import type { KoaContextWithOIDC } from 'oidc-provider';
import { announcesBody, bodyParserError, readBodyText } from '../common/body-parsing';

/** oidc-provider reads at most this much of a body (lib/shared/selective_body.js), and answers more with a 400 "failed to parse". */
export const PROVIDER_BODY_LIMIT = 56 * 1024;

/**
 * A body larger than the provider reads is 413, as on every other route, in the provider's error
 * form; so is one it cannot read as sent, compressed (415): the provider reads the bytes as they
 * come, so a gzipped form would be parsed as garbage (a misleading `invalid_client`). Only its
 * POST endpoints read a body; a GET's is ignored (app.factory.ts, dropBodyOfGet).
 *
 * A form or JSON body is then read here, by the API's rules (body-parsing.ts, readBodyText): a
 * charset other than UTF-8 is 415, bytes or a form's %-escapes that are not UTF-8 are 400, a
 * BOM is dropped. The provider's own reading put U+FFFD in their place whatever the charset said
 * (a client named "App\ufffd\ufffd", shown so on the consent page), and refused a BOM. It parses
 * the text read here (selective_body.js of the pinned version takes a body already read from
 * `req.body`, and says so once on stderr, at the first). Other media types it refuses unread.
 */
export async function unreadableBody(ctx: KoaContextWithOIDC, next: () => Promise<void>): Promise<void> {
  if (ctx.method !== 'POST') return next();
  const encoding = ctx.get('Content-Encoding').trim().toLowerCase();
  if (encoding && encoding !== 'identity') {
    return refuseBody(ctx, 415, 'The OAuth endpoints read the form as sent: no Content-Encoding (or identity)');
  }
  if ((ctx.request.length ?? 0) > PROVIDER_BODY_LIMIT) return refuseBody(ctx, 413, TOO_LARGE);
  const form = ctx.is('application/x-www-form-urlencoded');
  if (!announcesBody(ctx.req.headers) || !(form || ctx.is('application/json'))) return next();
  try {
    (ctx.req as { body?: Buffer }).body = Buffer.from(await readBodyText(ctx.req, PROVIDER_BODY_LIMIT, Boolean(form)));
  } catch (err) {
    const refused = bodyParserError(err);
    return refuseBody(ctx, refused.status, refused.status === 413 ? TOO_LARGE : refused.message);
  }
  return next();
}

const TOO_LARGE = `The request body is too large: the OAuth endpoints take at most ${PROVIDER_BODY_LIMIT} bytes`;

function refuseBody(ctx: KoaContextWithOIDC, status: number, description: string): void {
  ctx.status = status;
  ctx.set('Connection', 'close'); // the body may be left unread
  ctx.body = { error: 'invalid_request', error_description: description };
}
