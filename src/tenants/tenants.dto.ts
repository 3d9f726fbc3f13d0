import { ApiProperty } from '@nestjs/swagger';
import { ApiKeyResponse, CreatedApiKeyResponse } from '../keys/keys.dto';
import { IsUserName } from '../users/users.dto';

export class CreateTenantDto {
  @ApiProperty({ minLength: 1, maxLength: 200, pattern: '\\S', description: 'Not only whitespace or invisible characters (U+200B, U+3164, …); no control characters or line separators (U+2028, U+2029) nor bidirectional overrides (U+202A–U+202E, U+2066–U+2069)' })
  @IsUserName()
  name: string;
}

export class TenantResponse {
  @ApiProperty() id: string;
  @ApiProperty() name: string;
  @ApiProperty({ format: 'date-time' }) created_at: string;
}

export class DeletedTenantResponse extends TenantResponse {
  @ApiProperty({ format: 'date-time', description: 'When it was deleted; its data is purged in the background from then on' }) deleted_at: string;
}

export class TenantList {
  @ApiProperty({ type: [TenantResponse] }) tenants: TenantResponse[];
  @ApiProperty({ type: String, nullable: true }) next_cursor: string | null;
}

export class CreatedTenantResponse {
  @ApiProperty({ type: TenantResponse }) tenant: TenantResponse;
  @ApiProperty({ type: CreatedApiKeyResponse, description: 'The new tenant\'s first admin key, plaintext included once' }) admin_key: ApiKeyResponse;
}
