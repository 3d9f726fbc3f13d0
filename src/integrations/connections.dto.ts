import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsString, MaxLength } from 'class-validator';
import { PageQuery } from '../common/pagination';
import { IsOptionalNonNull } from '../common/validation';

export class StartConnectionQuery {
  @ApiProperty({ description: 'The integration to connect (its manifest must have `oauth`)' })
  @IsOptionalNonNull() @IsString() @MaxLength(100)
  integration_id?: string;

  @ApiProperty({ description: 'Where to send the user afterwards; must be on SVC_OAUTH_REDIRECT_ALLOWLIST' })
  @IsOptionalNonNull() @IsString() @MaxLength(2000)
  redirect_uri?: string;
}

export class ConnectorCallbackQuery {
  @ApiPropertyOptional() @IsOptionalNonNull() @IsString() @MaxLength(4000) code?: string;
  @ApiPropertyOptional() @IsOptionalNonNull() @IsString() @MaxLength(8000) state?: string;
  @ApiPropertyOptional() @IsOptionalNonNull() @IsString() @MaxLength(200) error?: string;
  @ApiPropertyOptional() @IsOptionalNonNull() @IsString() @MaxLength(2000) error_description?: string;
  @ApiPropertyOptional() @IsOptionalNonNull() @IsString() @MaxLength(2000) iss?: string;
}

export class ConnectionResponse {
  @ApiProperty() id: string;
  @ApiProperty() integration_id: string;
  @ApiProperty({ description: 'The integration\'s manifest name' }) provider: string;
  @ApiProperty({ type: String, nullable: true }) scope: string | null;
  @ApiProperty({ type: String, nullable: true }) token_type: string | null;
  @ApiProperty({ type: String, nullable: true, format: 'date-time', description: 'When the upstream access token expires' }) expires_at: string | null;
  @ApiProperty({ description: 'Whether it can be refreshed (tokens are never returned)' }) has_refresh_token: boolean;
  @ApiProperty({ format: 'date-time' }) created_at: string;
  @ApiProperty({ type: String, nullable: true, format: 'date-time' }) refreshed_at: string | null;
}

export class ConnectionList {
  @ApiProperty({ type: [ConnectionResponse] }) connections: ConnectionResponse[];
  @ApiProperty({ type: String, nullable: true }) next_cursor: string | null;
}

export class ListConnectionsQuery extends PageQuery {}
