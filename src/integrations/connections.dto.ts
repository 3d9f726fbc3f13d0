import { ApiProperty } from '@nestjs/swagger';
import { PageQuery } from '../common/pagination';
import { TextParam } from '../common/validation';

export class StartConnectionQuery {
  @TextParam({ required: true, minLength: 1, maxLength: 100, description: 'The integration to connect (its manifest must have `oauth`)' })
  integration_id: string;

  @TextParam({ required: true, minLength: 1, maxLength: 2000, description: 'Where to send the user afterwards; must be on SVC_OAUTH_REDIRECT_ALLOWLIST' })
  redirect_uri: string;
}

/** The longest value of each parameter of the upstream's redirect the callback reads (validated and documented alike). */
export const UPSTREAM_REDIRECT_MAX_LENGTHS = { code: 4000, state: 8000, error: 200, error_description: 2000, iss: 2000 } as const;

export class ConnectorCallbackQuery {
  @TextParam({ maxLength: UPSTREAM_REDIRECT_MAX_LENGTHS.code }) code?: string;
  @TextParam({ maxLength: UPSTREAM_REDIRECT_MAX_LENGTHS.state }) state?: string;
  @TextParam({ maxLength: UPSTREAM_REDIRECT_MAX_LENGTHS.error }) error?: string;
  @TextParam({ maxLength: UPSTREAM_REDIRECT_MAX_LENGTHS.error_description }) error_description?: string;
  @TextParam({ maxLength: UPSTREAM_REDIRECT_MAX_LENGTHS.iss }) iss?: string;
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
