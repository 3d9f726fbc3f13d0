/** Every TypeORM entity, listed once for the app module and the CLI DataSource. */
import { ApiKeyEntity } from '../keys/api-key.entity';
import { TenantEntity } from '../tenants/tenant.entity';

export const entities = [TenantEntity, ApiKeyEntity];
