/** Every TypeORM entity, listed once for the app module and the CLI DataSource. */
import { BlobEntity } from '../blobs/blob.entity';
import { ApiKeyEntity } from '../keys/api-key.entity';
import { TenantEntity } from '../tenants/tenant.entity';

export const entities = [TenantEntity, ApiKeyEntity, BlobEntity];
