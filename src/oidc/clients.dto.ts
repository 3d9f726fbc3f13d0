import { ArgumentMetadata, Injectable, PipeTransform } from '@nestjs/common';
import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { ArrayMaxSize, IsArray, IsIn, IsInt, IsOptional, IsString, Max, Min } from 'class-validator';
import { invalidId } from '../common/ids';
import { PageQuery } from '../common/pagination';
import { IsOptionalNonNull, IsPermissionMap, MaxChars } from '../common/validation';
import type { PermissionMap } from '../keys/api-key.entity';
import { PERMISSION_MAP_DOC } from '../keys/keys.dto';
import { ApiInteger, ApiIntegerOptional } from '../openapi/api-integer.decorator';
import { IsUserName } from '../users/users.dto';
import { MAX_PREVIOUS_SECRET_SECONDS } from '../common/secret-rotation';

/** How an admin-registered client authenticates: every method discovery names. */
const ADMIN_AUTH_METHODS = ['client_secret_basic', 'client_secret_post', 'client_secret_jwt', 'private_key_jwt', 'none'];

/** Methods without a client secret: none is made, and there is none to rotate. */
export const SECRETLESS_AUTH_METHODS: ReadonlySet<string> = new Set(['none', 'private_key_jwt']);

const JWKS_URI_DOC =
  'Where the provider fetches the public keys a `private_key_jwt` client signs its assertions with (required for that method): fetched as a webhook target is called (no private address unless WEBHOOK_ALLOW_PRIVATE_TARGETS, no redirect, at most 64 KiB)';

/**
 * RFC 7591 client metadata that first-party registration takes (the provider checks the values:
 * URIs, redirect rules), plus the default extension grant.
 */
export class RegisterClientDto {
  @ApiPropertyOptional({
    type: [String],
    example: ['https://app.example.com/callback'],
    description: 'Exact-match redirect URIs (a loopback IP one, http://127.0.0.1 or http://[::1], matches on any port); required (at least one) when grant_types includes authorization_code, as it does by default',
    maxItems: 20,
    maxLength: 2000,
    uniqueItems: true,
  })
  @IsOptionalNonNull() @IsArray() @ArrayMaxSize(20) @IsString({ each: true }) @MaxChars(2000, { each: true })
  redirect_uris?: string[];

  @ApiPropertyOptional({
    type: [String],
    enum: ['authorization_code', 'refresh_token', 'client_credentials', 'urn:ietf:params:oauth:grant-type:device_code'],
    example: ['authorization_code', 'refresh_token'],
    uniqueItems: true,
    description: 'Default authorization_code and refresh_token',
  })
  @IsOptionalNonNull() @IsArray() @IsIn(['authorization_code', 'refresh_token', 'client_credentials', 'urn:ietf:params:oauth:grant-type:device_code'], { each: true })
  grant_types?: string[];

  @ApiPropertyOptional({ type: [String], enum: ['code'], example: ['code'], uniqueItems: true })
  @IsOptionalNonNull() @IsArray() @IsIn(['code'], { each: true })
  response_types?: string[];

  @ApiPropertyOptional({
    enum: ADMIN_AUTH_METHODS,
    default: 'client_secret_basic',
    description: '`none`: a public client (PKCE, no secret); `client_secret_jwt`: an HS256 assertion signed with the secret; `private_key_jwt`: an assertion signed with the client\'s own key, published at `jwks_uri` (no secret) (RFC 7523)',
  })
  @IsOptionalNonNull() @IsIn(ADMIN_AUTH_METHODS)
  token_endpoint_auth_method?: string;

  @ApiPropertyOptional({
    minLength: 1,
    maxLength: 200,
    description: 'Shown to users on the sign-in, consent, device, logout and account pages. The service\'s name rule: not blank, nor only invisible characters (U+200B, U+3164, …); no control characters or line separators (U+2028, U+2029) nor bidirectional overrides (U+202A–U+202E, U+2066–U+2069). Open registration keeps to the same rule',
  })
  @IsOptionalNonNull() @IsUserName()
  client_name?: string;

  @ApiPropertyOptional({ example: 'openid core.note:read core.note:write', description: 'The scopes the client may ask for (SPEC 5.4 grammar and openid, profile, email, offline_access)' })
  @IsOptionalNonNull() @IsString() @MaxChars(4000)
  scope?: string;

  @ApiPropertyOptional({
    type: [String],
    maxItems: 20,
    maxLength: 2000,
    uniqueItems: true,
    example: ['https://app.example.com/signed-out'],
    description: 'Where RP-initiated logout may return to (OpenID RP-Initiated Logout)',
  })
  @IsOptionalNonNull() @IsArray() @ArrayMaxSize(20) @IsString({ each: true }) @MaxChars(2000, { each: true })
  post_logout_redirect_uris?: string[];

  @ApiPropertyOptional({ enum: ['web', 'native'], default: 'web' })
  @IsOptionalNonNull() @IsIn(['web', 'native'])
  application_type?: string;

  @ApiPropertyOptional({ type: [String], maxItems: 20, maxLength: 320, example: ['ops@example.com'] })
  @IsOptionalNonNull() @IsArray() @ArrayMaxSize(20) @IsString({ each: true }) @MaxChars(320, { each: true })
  contacts?: string[];

  @ApiPropertyOptional({ description: 'Web page of the client, shown on the consent page' })
  @IsOptionalNonNull() @IsString() @MaxChars(2000)
  client_uri?: string;

  @ApiPropertyOptional()
  @IsOptionalNonNull() @IsString() @MaxChars(2000)
  logo_uri?: string;

  @ApiPropertyOptional()
  @IsOptionalNonNull() @IsString() @MaxChars(2000)
  policy_uri?: string;

  @ApiPropertyOptional()
  @IsOptionalNonNull() @IsString() @MaxChars(2000)
  tos_uri?: string;

  @ApiPropertyOptional({ maxLength: 2000, description: JWKS_URI_DOC })
  @IsOptionalNonNull() @IsString() @MaxChars(2000)
  jwks_uri?: string;

  @ApiPropertyOptional({ ...PERMISSION_MAP_DOC, example: { 'acme.notes': 'write' }, description: 'Default extension grant of the client\'s tokens (SPEC 5.4)' })
  @IsOptionalNonNull() @IsPermissionMap()
  extension_permissions?: PermissionMap;
}

/**
 * What PATCH /auth/clients/{client_id} changes: the metadata that says where the client lives and
 * what it may ask for, with POST's limits. Absent fields stay; `null` removes an optional
 * description. Not here, so refused as unknown fields: the id and secret (the secret has its own
 * route), `grant_types`, `response_types`, `token_endpoint_auth_method` and `application_type`
 * (what kind of client it is: changing it would leave secrets, device codes or tokens of a kind
 * the client no longer has), and `extension_permissions` (every existing token carries it at once).
 */
export class UpdateClientDto {
  @ApiPropertyOptional({ type: [String], maxItems: 20, maxLength: 2000, uniqueItems: true, example: ['https://app.example.com/callback'], description: 'Replaces the list; a removed URI is refused by the next authorization, and codes and sign-ins in progress for it end' })
  @IsOptionalNonNull() @IsArray() @ArrayMaxSize(20) @IsString({ each: true }) @MaxChars(2000, { each: true })
  redirect_uris?: string[];

  @ApiPropertyOptional({ type: [String], nullable: true, maxItems: 20, maxLength: 2000, uniqueItems: true, description: 'Replaces the list; null removes it' })
  @IsOptional() @IsArray() @ArrayMaxSize(20) @IsString({ each: true }) @MaxChars(2000, { each: true })
  post_logout_redirect_uris?: string[] | null;

  @ApiPropertyOptional({ minLength: 1, maxLength: 200, type: String, nullable: true, description: 'The name rule of POST; null removes it (the pages then name the client by its id)' })
  @IsOptional() @IsUserName()
  client_name?: string | null;

  @ApiPropertyOptional({
    example: 'openid core.note:read',
    description: 'Replaces the scopes the client may ask for. Users\' grants lose the scopes it no longer has, and so do the tokens they issued, from the next request. Cannot be removed (that would allow every scope)',
  })
  @IsOptionalNonNull() @IsString() @MaxChars(4000)
  scope?: string;

  @ApiPropertyOptional({ type: [String], nullable: true, maxItems: 20, maxLength: 320, description: 'null removes them' })
  @IsOptional() @IsArray() @ArrayMaxSize(20) @IsString({ each: true }) @MaxChars(320, { each: true })
  contacts?: string[] | null;

  @ApiPropertyOptional({ type: String, nullable: true, description: 'null removes it' })
  @IsOptional() @IsString() @MaxChars(2000)
  client_uri?: string | null;

  @ApiPropertyOptional({ type: String, nullable: true, description: 'null removes it' })
  @IsOptional() @IsString() @MaxChars(2000)
  logo_uri?: string | null;

  @ApiPropertyOptional({ type: String, nullable: true, description: 'null removes it' })
  @IsOptional() @IsString() @MaxChars(2000)
  policy_uri?: string | null;

  @ApiPropertyOptional({ type: String, nullable: true, description: 'null removes it' })
  @IsOptional() @IsString() @MaxChars(2000)
  tos_uri?: string | null;

  @ApiPropertyOptional({ type: String, nullable: true, maxLength: 2000, description: `${JWKS_URI_DOC}; null removes it (refused for a private_key_jwt client, which needs it)` })
  @IsOptional() @IsString() @MaxChars(2000)
  jwks_uri?: string | null;
}

/** What every answer about a client shows: its metadata, never its secret. */
class ClientFields {
  @ApiProperty() client_id: string;
  @ApiInteger({ description: 'Seconds since the epoch' }) client_id_issued_at: number;
  @ApiPropertyOptional({ type: [String], description: 'Absent for a client without the authorization_code grant' }) redirect_uris?: string[];
  @ApiProperty({ type: [String] }) grant_types: string[];
  @ApiProperty({ type: [String] }) response_types: string[];
  @ApiProperty() token_endpoint_auth_method: string;
  @ApiPropertyOptional() client_name?: string;
  @ApiPropertyOptional() scope?: string;
  @ApiPropertyOptional({ type: [String] }) post_logout_redirect_uris?: string[];
  @ApiPropertyOptional() application_type?: string;
  @ApiPropertyOptional({ type: [String] }) contacts?: string[];
  @ApiPropertyOptional() client_uri?: string;
  @ApiPropertyOptional() logo_uri?: string;
  @ApiPropertyOptional() policy_uri?: string;
  @ApiPropertyOptional() tos_uri?: string;
  @ApiPropertyOptional({ description: 'Where the provider fetches the keys a private_key_jwt client signs with' }) jwks_uri?: string;
  @ApiProperty({ type: 'object', additionalProperties: { enum: ['read', 'write'] } }) extension_permissions: PermissionMap;
}

export class RegisteredClient extends ClientFields {
  @ApiPropertyOptional({ description: 'Confidential clients only; shown once' }) client_secret?: string;
  @ApiProperty() tenant_id: string;
}

export class OAuthClient extends ClientFields {
  @ApiProperty({ nullable: true, type: String, description: 'null for a client registered through open registration (RFC 7591), which a root-tenant admin manages' })
  tenant_id: string | null;
  @ApiProperty({
    type: String,
    format: 'date-time',
    nullable: true,
    description: 'Until when the secret replaced by the last rotation still authenticates the client beside the current one (`expire_previous_in`); null when none does',
  })
  previous_secret_expires_at: string | null;
}

export const CLIENT_REGISTRATIONS = ['open', 'admin'] as const;
export type ClientRegistration = (typeof CLIENT_REGISTRATIONS)[number];

export class ListClientsQuery extends PageQuery {
  @ApiPropertyOptional({
    enum: CLIENT_REGISTRATIONS,
    description: '`open`: only clients made by open registration (RFC 7591; a root-tenant admin manages them); `admin`: only those an admin of the tenant registered',
  })
  @IsOptionalNonNull() @IsIn(CLIENT_REGISTRATIONS)
  registration?: ClientRegistration;
}

export class OAuthClientList {
  @ApiProperty({ type: [OAuthClient] }) clients: OAuthClient[];
  @ApiProperty({ nullable: true, type: String }) next_cursor: string | null;
}

export class BlockedClient {
  @ApiProperty() client_id: string;
  @ApiProperty({ type: String, nullable: true, description: 'The name it registered with (its own claim), null when it has none or is gone' }) client_name: string | null;
  @ApiProperty({ format: 'date-time', description: 'When it was blocked' }) created_at: string;
}

export class BlockedClientList {
  @ApiProperty({ type: [BlockedClient], description: 'Newest first' }) blocked_clients: BlockedClient[];
  @ApiProperty({ nullable: true, type: String }) next_cursor: string | null;
}

export class RotateClientSecretDto {
  @ApiIntegerOptional({
    minimum: 0,
    maximum: MAX_PREVIOUS_SECRET_SECONDS,
    default: 0,
    description:
      'Seconds the replaced secret keeps authenticating the client beside the new one (`client_secret_basic`, `client_secret_post`), so its deployments can switch over; ' +
      '0 ends it at once. A rotation meanwhile ends the older secret at once',
  })
  @IsOptionalNonNull() @IsInt() @Min(0) @Max(MAX_PREVIOUS_SECRET_SECONDS)
  expire_previous_in?: number;
}

export class RotatedClient extends OAuthClient {
  @ApiProperty({ description: 'The new secret, shown only here; the one it replaced no longer authenticates, or only until `previous_secret_expires_at`' }) client_secret: string;
}

/**
 * A client id as the service makes them (POST /auth/clients: base64url; open registration:
 * oidc-provider's nanoid); anything else is 400 `invalid_id` rather than a pointless lookup.
 */
const CLIENT_ID = /^[A-Za-z0-9_-]{1,100}$/;

export const isClientId = (value: string): boolean => CLIENT_ID.test(value);

/** A path parameter naming one of the provider's ids, a client's or a grant's (the same alphabet and length). */
export class ParseProviderIdPipe implements PipeTransform<string, string> {
  constructor(private readonly kind: 'client' | 'grant') {}

  transform(value: string, metadata?: ArgumentMetadata): string {
    if (!isClientId(value)) throw invalidId(metadata?.data ?? `${this.kind}_id`, value, `a valid ${this.kind} id`);
    return value;
  }
}

@Injectable()
export class ParseClientIdPipe extends ParseProviderIdPipe {
  constructor() {
    super('client');
  }
}
