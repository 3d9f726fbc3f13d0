import { applyDecorators } from '@nestjs/common';
import { ApiProperty } from '@nestjs/swagger';
import { PageQuery } from '../common/pagination';
import { IsString } from 'class-validator';
import { IsOptionalNonNull, TextParam } from '../common/validation';

/** A text parameter of the upstream's redirect with no length of its own: the URL's bounds it. */
const UpstreamText = () => applyDecorators(IsOptionalNonNull(), IsString());

export class StartConnectionQuery {
  @TextParam({ required: true, minLength: 1, maxLength: 100, description: 'The integration to connect (its manifest must have `oauth`)' })
  integration_id: string;

  @TextParam({ required: true, minLength: 1, maxLength: 2000, description: 'Where to send the user afterwards; must be on SVC_OAUTH_REDIRECT_ALLOWLIST' })
  redirect_uri: string;
}

/** The longest code the callback exchanges: a longer one sends the user on with `invalid_request` (connections.service.ts). */
export const MAX_UPSTREAM_CODE_LENGTH = 4000;

/**
 * The parameters of the upstream's redirect the callback reads (validated and documented alike).
 * Only `state` and `iss` are refused over their length (400): the others come from the upstream
 * on the user's way back, and a refusal would leave the user on a JSON error with the state
 * unspent; an over-long one sends the user on with its error instead, as the service words it.
 */
export const UPSTREAM_REDIRECT_PARAMS = {
  code: { description: `Exchanged when at most ${MAX_UPSTREAM_CODE_LENGTH} characters; a longer one sends the user on with invalid_request` },
  state: { maxLength: 8000 },
  error: { description: 'Passed on when an RFC 6749 error code of at most 100 characters, else as server_error' },
  error_description: { description: 'Passed on cut to 500 characters' },
  iss: { maxLength: 2000 },
} as const;

export class ConnectorCallbackQuery {
  @UpstreamText() code?: string;
  @TextParam({ maxLength: UPSTREAM_REDIRECT_PARAMS.state.maxLength }) state?: string;
  @UpstreamText() error?: string;
  @UpstreamText() error_description?: string;
  @TextParam({ maxLength: UPSTREAM_REDIRECT_PARAMS.iss.maxLength }) iss?: string;
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
