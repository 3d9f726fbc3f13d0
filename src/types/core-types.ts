/**
 * Where the seeded core types live: in a tenant of their own that every tenant's reads include,
 * under a namespace no tenant may create in, so that they stay the same for all.
 */

export const CORE_TENANT = '00000000-0000-0000-0000-000000000000';
/** Names under it are core types' (reserved to them). */
export const CORE_PREFIX = 'core.';
