/**
 * The tenant an authenticated request works for, for code far from the request that shares
 * something among tenants: the main database pool gives one tenant only its share of
 * connections (src/database/tenant-shared-pool.ts). Work begun outside a request (background
 * tasks, the credential check itself) has none.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { FastifyReply, FastifyRequest } from 'fastify';

/** One per request: what is counted per request (a pool's checkouts) is keyed by this object. */
export interface RequestTenant {
  readonly tenantId: string;
}

export const requestTenant = new AsyncLocalStorage<RequestTenant>();

/**
 * A fastify preHandler hook: runs the rest of the request (guards, handler, filters) in its
 * tenant's context. Not at onRequest, where the principal is known already: the body is read
 * from socket events after it, which would run outside the context.
 */
export const enterTenantContext = (req: FastifyRequest, _reply: FastifyReply, done: () => void): void => {
  if (req.principal) requestTenant.run({ tenantId: req.principal.tenantId }, done);
  else done();
};
