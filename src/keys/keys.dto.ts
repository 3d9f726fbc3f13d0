import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsOptional, IsString, Matches, ValidateBy } from 'class-validator';
import { PATTERN_RE } from '../common/type-pattern';
import { cutChars } from '../common/input-policy';
import { PageQuery } from '../common/pagination';
import { isReadableName, IsOptionalNonNull, IsPermissionMap, IsRfc3339, MaxChars } from '../common/validation';
import type { PermissionMap, Role, Tier } from './api-key.entity';

import type { ApiPropertyOptions } from '@nestjs/swagger';

/**
 * What IsPermissionMap accepts: at most 200 patterns (isPattern: at most 200 characters each),
 * each read or write. Cast: @nestjs/swagger's types lack JSON Schema's propertyNames, which it passes on.
 */
export const PERMISSION_MAP_DOC = {
  type: 'object',
  additionalProperties: { type: 'string', enum: ['read', 'write'] },
  maxProperties: 200,
  propertyNames: { pattern: PATTERN_RE.source, maxLength: 200 },
  example: { 'core.note': 'write', 'core.*': 'read' },
} as ApiPropertyOptions;

/** How far ahead a key's `expires_at` may be: about 10 years. */
export const MAX_KEY_LIFETIME_DAYS = 3653;

/** Most characters a key's label holds (MaxChars). */
export const MAX_KEY_LABEL = 200;

/** A label the service makes from other text (the account page's form, a new tenant's name), cut to what POST /keys takes. */
export const keyLabel = (text: string): string => cutChars(text, MAX_KEY_LABEL);

/** A label is empty, or readable as a name is (isReadableName): it is shown in `GET /audit` and on the account page. */
const IsKeyLabel = () =>
  ValidateBy({
    name: 'isKeyLabel',
    validator: {
      validate: (v: unknown) => v === '' || isReadableName(v),
      defaultMessage: () => 'must be empty, or not blank and without control characters, line separators or bidirectional override characters',
    },
  });

/** No `default`s here: a PATCH leaves an absent field as it is, and generated clients send schema defaults. */
export class UpdateKeyDto {
  @ApiPropertyOptional({
    maxLength: MAX_KEY_LABEL,
    description: 'Empty, or not blank nor only invisible characters, with no control characters, line separators (U+2028, U+2029) or bidirectional overrides (U+202A–U+202E, U+2066–U+2069)',
  })
  @IsOptionalNonNull() @IsString() @MaxChars(MAX_KEY_LABEL) @IsKeyLabel()
  label?: string;

  @ApiPropertyOptional({ enum: ['admin', 'member'] })
  @IsOptionalNonNull() @IsIn(['admin', 'member'])
  role?: Role;

  @ApiPropertyOptional({ enum: ['library', 'feed'] })
  @IsOptionalNonNull() @IsIn(['library', 'feed'])
  default_tier?: Tier;

  @ApiPropertyOptional({ ...PERMISSION_MAP_DOC, description: 'Type pattern to access; most specific pattern wins' })
  @IsOptionalNonNull() @IsPermissionMap()
  type_permissions?: PermissionMap;

  @ApiPropertyOptional({ ...PERMISSION_MAP_DOC, description: 'Extension namespace pattern to access' })
  @IsOptionalNonNull() @IsPermissionMap()
  extension_permissions?: PermissionMap;

  @ApiPropertyOptional({ ...PERMISSION_MAP_DOC, description: 'Edge type pattern to access' })
  @IsOptionalNonNull() @IsPermissionMap()
  edge_permissions?: PermissionMap;

  // Future and within MAX_KEY_LIFETIME_DAYS: checked by KeysService (`expiryOf`), by the database's clock.
  @ApiPropertyOptional({
    type: String,
    format: 'date-time',
    nullable: true,
    description:
      'When the key stops working by itself: from then on it is refused (401 `unauthorized`) as a revoked key is, and what it registered (webhooks, event streams) stops receiving. ' +
      `RFC 3339 with a time zone; in the future and at most ${MAX_KEY_LIFETIME_DAYS} days (about 10 years) ahead, by the database's clock (the one expiry is judged by). Null or absent: never. On PATCH, null removes the expiry`,
  })
  @IsOptional() @IsRfc3339()
  expires_at?: string | null;
}

export class CreateKeyDto extends UpdateKeyDto {
  // The defaults the server applies when it creates a key (documentation only: the checks are inherited).
  @ApiPropertyOptional({ default: 'member', description: 'The bootstrap key is always admin' })
  role?: Role;

  @ApiPropertyOptional({ default: 'library' })
  default_tier?: Tier;

  // `app:<client_id>` is what OAuth apps' items carry: a key taking it could upsert over an app's items.
  @ApiPropertyOptional({
    description: 'Stamped on every item the key writes; unique per tenant; generated when omitted; `app:` is reserved for OAuth apps',
    maxLength: 100,
    pattern: '^(?!app:)[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$',
  })
  @IsOptionalNonNull()
  @Matches(/^(?!app:)[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$/, { message: 'must be 1-100 letters, digits, ".", "_", ":" or "-", and not start with "app:" (reserved for OAuth apps)' })
  source?: string;
}

export class ApiKeyResponse {
  @ApiProperty() id: string;
  @ApiProperty() tenant_id: string;
  /** Only in a creation response, documented there (CreatedApiKeyResponse). */
  key?: string;
  @ApiProperty({ description: 'First characters of the key, to tell keys apart' }) key_hint: string;
  @ApiProperty() label: string;
  @ApiProperty({ enum: ['admin', 'member'] }) role: Role;
  @ApiProperty() source: string;
  @ApiProperty({ enum: ['library', 'feed'] }) default_tier: Tier;
  @ApiProperty(PERMISSION_MAP_DOC) type_permissions: PermissionMap;
  @ApiProperty(PERMISSION_MAP_DOC) extension_permissions: PermissionMap;
  @ApiProperty(PERMISSION_MAP_DOC) edge_permissions: PermissionMap;
  @ApiProperty({ format: 'date-time' }) created_at: string;
  @ApiProperty({ format: 'date-time' }) updated_at: string;
  @ApiProperty({ nullable: true, type: String, format: 'date-time' }) revoked_at: string | null;
  @ApiProperty({
    nullable: true,
    type: String,
    description: 'The user who made the key on the account pages (POST /auth/keys); it is revoked when that user is deleted or stops being an admin. Null for keys made with POST /keys',
  })
  created_by_user_id: string | null;
  @ApiProperty({
    nullable: true,
    type: String,
    format: 'date-time',
    description: 'When the key stops working by itself (as if revoked); null: never. An expired key stays listed',
  })
  expires_at: string | null;
  @ApiProperty({
    nullable: true,
    type: String,
    format: 'date-time',
    description:
      'When the key last authenticated a request, to the minute: written at most once a minute per key, shortly after the request, so it may lag a request by up to a minute. Null: not used since it was made (or since this field was added)',
  })
  last_used_at: string | null;
}

/** The answer to POST /keys: the only one that carries the plaintext key. */
export class CreatedApiKeyResponse extends ApiKeyResponse {
  @ApiProperty({ description: 'Plaintext key; only in this response' }) key: string;
}

export const KEY_STATUSES = ['active', 'revoked', 'expired'] as const;
export type KeyStatus = (typeof KEY_STATUSES)[number];

/** `GET /keys`: the filters an admin cleaning up keys asks by. */
export class ListKeysQuery extends PageQuery {
  @ApiPropertyOptional({
    enum: KEY_STATUSES,
    description: '`active`: neither revoked nor expired; `revoked`; `expired`: past `expires_at` and not revoked (by the database\'s clock, as authentication judges it)',
  })
  @IsOptionalNonNull() @IsIn(KEY_STATUSES)
  status?: KeyStatus;

  @ApiPropertyOptional({ enum: ['admin', 'member'] })
  @IsOptionalNonNull() @IsIn(['admin', 'member'])
  role?: Role;

  @ApiPropertyOptional({
    format: 'date-time',
    description: 'Only keys never used, or last used before this instant (`last_used_at` is written at most once a minute per key)',
  })
  @IsOptionalNonNull() @IsRfc3339()
  last_used_before?: string;
}

export class ApiKeyList {
  @ApiProperty({ type: [ApiKeyResponse] }) keys: ApiKeyResponse[];
  @ApiProperty({ nullable: true, type: String }) next_cursor: string | null;
}
