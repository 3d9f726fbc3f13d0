import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { isEmail, IsBoolean, IsIn, IsOptional, IsUrl, ValidateBy } from 'class-validator';
import { PageQuery } from '../common/pagination';
import { hasCharLength, hasHiddenCharacter, isBlank, IsOptionalNonNull, IsQueryBoolean, isReadableName, IsRfc3339, MaxChars, TextParam } from '../common/validation';
import { MAX_KEY_LIFETIME_DAYS } from '../keys/keys.dto';

export const USER_ROLES = ['admin', 'member'] as const;
export type UserRole = (typeof USER_ROLES)[number];

/** The longest email an account can have (RFC 5321's path limit less its brackets). */
export const MAX_EMAIL_LENGTH = 254;

/**
 * The one rule for a user's email, POST /users and the sign-up page alike (length first: the
 * check backtracks on long input). isEmail takes bidirectional overrides, zero-width and other
 * invisible characters in an address, which the pages and apps (`email`, `preferred_username`)
 * would show as another address: hasHiddenCharacter refuses them. Not normalised (NFC, IDNA).
 */
export const isUserEmail = (email: string): boolean => email.length <= MAX_EMAIL_LENGTH && !hasHiddenCharacter(email) && isEmail(email);

/**
 * The one rule for a password, POST and PATCH /users and the sign-up page alike: 10 to 1024
 * characters, not all of them blank (isBlank: whitespace or invisible, such as zero-width
 * spaces; ten spaces pass a length check and guess in one try).
 * Characters are counted as the OpenAPI document's minLength counts them (hasCharLength).
 */
export const isUserPassword = (password: string): boolean => hasCharLength(password, 10, 1024) && !isBlank(password);

const IsUserPassword = () =>
  ValidateBy({
    name: 'isUserPassword',
    validator: { validate: (v: unknown) => typeof v === 'string' && isUserPassword(v), defaultMessage: () => 'must be 10 to 1024 characters, not all whitespace or invisible' },
  });

/**
 * The one rule for a user's name, POST and PATCH /users and the sign-up page alike, and so for a
 * tenant's (POST /tenants; sign-up names the new tenant as its admin) and an OAuth client's: at
 * most 200 characters (hasCharLength), and readable (isReadableName: not blank, nor made only of
 * invisible characters).
 */
export const isUserName = (name: unknown): name is string => typeof name === 'string' && hasCharLength(name, 0, 200) && isReadableName(name);

/** The longest `disabled_reason`. */
export const MAX_DISABLED_REASON = 500;

/** Why a user was disabled: readable text (isReadableName) of at most MAX_DISABLED_REASON characters. */
const IsDisabledReason = () =>
  ValidateBy({
    name: 'isDisabledReason',
    validator: {
      validate: (v: unknown) => typeof v === 'string' && hasCharLength(v, 0, MAX_DISABLED_REASON) && isReadableName(v),
      defaultMessage: () => `must be 1 to ${MAX_DISABLED_REASON} characters, not blank, without control characters or bidirectional override characters`,
    },
  });

/** How far ahead a disablement's end (`disabled_until`) may be: as far as a key's expiry may. */
export const MAX_DISABLED_DAYS = MAX_KEY_LIFETIME_DAYS;

export const IsUserName = () =>
  ValidateBy({
    name: 'isUserName',
    validator: {
      validate: isUserName,
      defaultMessage: () => 'must be 1 to 200 characters, not blank, without control characters or bidirectional override characters',
    },
  });

const PASSWORD_DOC = { minLength: 10, maxLength: 1024, description: 'Not only whitespace or invisible characters. Stored as a scrypt hash; never returned' };
const NAME_DOC = { minLength: 1, maxLength: 200, description: 'Not blank, nor only invisible characters (U+200B, U+3164, …); no control characters or line separators (U+2028, U+2029) nor bidirectional overrides (U+202A–U+202E, U+2066–U+2069)' };
const ROLE_DOC = { enum: USER_ROLES, description: 'What the user may consent to for an app: an admin grants admin rights' };
const EMAIL_VERIFIED_DOC = {
  description:
    'Whether the tenant vouches for the address: the OIDC `email_verified` claim. The service sends no mail, so only an admin sets it (sign-ups start false)',
};
const DISABLED_DOC = {
  description:
    'Suspended by an admin: the user cannot sign in (refused as a wrong password is), and disabling them ends their sign-ins, grants and tokens and revokes the API keys they made on the account pages, for good: enabling them again, or the end of a temporary disablement (`disabled_until`), lets them sign in, nothing more',
};
const DISABLED_REASON_DOC = {
  maxLength: MAX_DISABLED_REASON,
  description:
    'Why the user was disabled, for the tenant\'s admins (never shown to the user): only with `disabled` true, and cleared when they are enabled again',
};
const DISABLED_UNTIL_DOC = {
  type: String,
  format: 'date-time',
  description:
    'When a disablement ends by itself: from then on the user is enabled again (`disabled` false, and this and `disabled_reason` null), judged by the database\'s clock, with nobody acting; what disabling ended stays ended. ' +
    `RFC 3339 with a time zone, read back in UTC; only with \`disabled\` true, in the future and at most ${MAX_DISABLED_DAYS} days (about 10 years) ahead. Null: the disablement lasts until an admin enables the user`,
};
const PICTURE_DOC = { description: 'https URL of a picture (the OIDC `picture` claim)', maxLength: 2000 };

/** A picture is shown by relying parties (the ID token's `picture` claim): an https URL with a domain name or an address. */
const IsPictureUrl = () => IsUrl({ protocols: ['https'], require_protocol: true }, { message: 'must be an https URL such as https://example.com/me.png' });

export class CreateUserDto {
  @ApiProperty({ example: 'ada@example.com', maxLength: 254, description: 'Signs in to this user only: unique across the service, in any letter case. No control, format (U+202E, U+200B, …) or other invisible characters' })
  @Transform(({ value }) => (typeof value === 'string' ? value.trim() : value))
  @ValidateBy({
    name: 'isUserEmail',
    validator: { validate: (v: unknown) => typeof v === 'string' && isUserEmail(v), defaultMessage: () => 'must be an email address of at most 254 characters, without control, format or invisible characters' },
  })
  email: string;

  @ApiProperty(PASSWORD_DOC)
  @IsUserPassword()
  password: string;

  @ApiProperty(NAME_DOC)
  @IsUserName()
  name: string;

  @ApiPropertyOptional({ ...ROLE_DOC, default: 'member' })
  @IsOptionalNonNull() @IsIn(USER_ROLES)
  role?: UserRole;

  @ApiPropertyOptional(PICTURE_DOC)
  @IsOptionalNonNull() @IsPictureUrl() @MaxChars(2000)
  picture?: string;

  @ApiPropertyOptional({ ...EMAIL_VERIFIED_DOC, default: false })
  @IsOptionalNonNull() @IsBoolean()
  email_verified?: boolean;

  @ApiPropertyOptional({ ...DISABLED_DOC, default: false })
  @IsOptionalNonNull() @IsBoolean()
  disabled?: boolean;

  @ApiPropertyOptional(DISABLED_REASON_DOC)
  @IsOptionalNonNull() @IsDisabledReason()
  disabled_reason?: string;

  // In the future and within MAX_DISABLED_DAYS: checked by UsersService (`disablementOf`), by the database's clock.
  @ApiPropertyOptional(DISABLED_UNTIL_DOC)
  @IsOptionalNonNull() @IsRfc3339()
  disabled_until?: string;
}

/**
 * PATCH /users/{id}: each field as POST /users checks it, absent ones left as they are (no
 * `default`s: generated clients send schema defaults). The email is the account's sign-in and is
 * not changed here.
 */
export class UpdateUserDto {
  @ApiPropertyOptional(PASSWORD_DOC)
  @IsOptionalNonNull() @IsUserPassword()
  password?: string;

  @ApiPropertyOptional(NAME_DOC)
  @IsOptionalNonNull() @IsUserName()
  name?: string;

  @ApiPropertyOptional({ ...ROLE_DOC, description: `${ROLE_DOC.description}. A key the user made cannot demote them (409 \`conflict\`): that would lock its caller out` })
  @IsOptionalNonNull() @IsIn(USER_ROLES)
  role?: UserRole;

  @ApiPropertyOptional({ ...PICTURE_DOC, type: String, nullable: true, description: `${PICTURE_DOC.description}; null removes it` })
  @IsOptional() @IsPictureUrl() @MaxChars(2000)
  picture?: string | null;

  @ApiPropertyOptional(EMAIL_VERIFIED_DOC)
  @IsOptionalNonNull() @IsBoolean()
  email_verified?: boolean;

  @ApiPropertyOptional({
    ...DISABLED_DOC,
    description: `${DISABLED_DOC.description}. A key the user made cannot disable them (409 \`conflict\`): that would lock its caller out`,
  })
  @IsOptionalNonNull() @IsBoolean()
  disabled?: boolean;

  @ApiPropertyOptional({ ...DISABLED_REASON_DOC, type: String, nullable: true, description: `${DISABLED_REASON_DOC.description}; null removes it` })
  @IsOptional() @IsDisabledReason()
  disabled_reason?: string | null;

  @ApiPropertyOptional({ ...DISABLED_UNTIL_DOC, nullable: true, description: `${DISABLED_UNTIL_DOC.description}; null removes the end, making the disablement last until an admin enables the user` })
  @IsOptional() @IsRfc3339()
  disabled_until?: string | null;
}

export class UserResponse {
  @ApiProperty() id: string;
  @ApiProperty() tenant_id: string;
  @ApiProperty() email: string;
  @ApiProperty() name: string;
  @ApiProperty({ enum: USER_ROLES }) role: UserRole;
  @ApiProperty({ type: String, nullable: true }) picture: string | null;
  @ApiProperty(EMAIL_VERIFIED_DOC) email_verified: boolean;
  @ApiProperty(DISABLED_DOC) disabled: boolean;
  @ApiProperty({ ...DISABLED_REASON_DOC, type: String, nullable: true }) disabled_reason: string | null;
  @ApiProperty({ ...DISABLED_UNTIL_DOC, nullable: true }) disabled_until: string | null;
  @ApiProperty({ format: 'date-time' }) created_at: string;
  @ApiProperty({
    format: 'date-time',
    description: 'When its name, role, picture, email_verified, disabled, disabled_reason, disabled_until or password last changed by a request (not when a disablement ended by itself at its `disabled_until`)',
  })
  updated_at: string;
}

export class UserList {
  @ApiProperty({ type: [UserResponse] }) users: UserResponse[];
  @ApiProperty({ type: String, nullable: true }) next_cursor: string | null;
}

export class ListUsersQuery extends PageQuery {
  @TextParam({ minLength: 1, maxLength: 254, description: 'The user with this email, in any letter case (an email signs in to one account)' })
  email?: string;

  @ApiPropertyOptional({ description: 'Only the disabled users (true), or only the enabled ones (false): a user whose `disabled_until` has passed is enabled' })
  @IsOptionalNonNull() @IsQueryBoolean()
  disabled?: boolean;
}
