/**
 * What an OAuth access token needs to call a route, where the route's `@Requires` cannot say it
 * because the service checks the request's data (the item's type, say): scope templates of
 * SPEC 5.4 that always apply (`<type>:write`, `edge.<type>:write`), and a note on the rest
 * (`metadata:write` when the body sets tags). security.ts lists the scopes in the operation's
 * `oauth2` requirement, beside any `@Requires({ scope })`, and adds the note to its description.
 */
import { ApiExtension } from '@nestjs/swagger';

/** Read and removed by security.ts. */
export const OAUTH_EXTENSION = 'x-oauth';

export interface OAuthNeeds {
  scopes?: string[];
  note?: string;
}

export const ApiOAuth = (needs: OAuthNeeds) => ApiExtension(OAUTH_EXTENSION, needs);
