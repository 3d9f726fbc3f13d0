import { ApiProperty } from '@nestjs/swagger';
import { IsString, Length, Matches } from 'class-validator';
import { ApiKeyResponse, CreatedApiKeyResponse } from '../keys/keys.dto';

export class CreateTenantDto {
  @ApiProperty({ minLength: 1, maxLength: 200, pattern: '\\S', description: 'Not only whitespace' })
  @IsString() @Length(1, 200) @Matches(/\S/, { message: 'must not be only whitespace' })
  name: string;
}

export class TenantResponse {
  @ApiProperty() id: string;
  @ApiProperty() name: string;
  @ApiProperty() created_at: string;
}

export class CreatedTenantResponse {
  @ApiProperty({ type: TenantResponse }) tenant: TenantResponse;
  @ApiProperty({ type: CreatedApiKeyResponse, description: 'The new tenant\'s first admin key, plaintext included once' }) admin_key: ApiKeyResponse;
}
