/** Every migration, in order. Listed explicitly so the same list serves src (tests) and dist. */
import { TenantsAndKeys1732300000000 } from './1732300000000-tenants-and-keys';

export const migrations = [TenantsAndKeys1732300000000];
