import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { isEmail, IsIn, IsString, IsUrl, Length, MaxLength, ValidateBy } from 'class-validator';
import { PageQuery } from '../common/pagination';
import { IsOptionalNonNull } from '../common/validation';

export const USER_ROLES = ['admin', 'member'] as const;
export type UserRole = (typeof USER_ROLES)[number];

/** The one rule for a user's email, POST /users and the sign-up page alike (length first: the check backtracks on long input). */
export const isUserEmail = (email: string): boolean => email.length <= 254 && isEmail(email);

/**
 * The one rule for a password, POST /users and the sign-up page alike: 10 to 1024 characters,
 * not all of them whitespace (ten spaces pass a length check and guess in one try).
 */
export const isUserPassword = (password: string): boolean => password.length >= 10 && password.length <= 1024 && /\S/.test(password);

export class CreateUserDto {
  @ApiProperty({ example: 'ada@example.com', maxLength: 254, description: 'Signs in to this user only: unique across the service, in any letter case' })
  @Transform(({ value }) => (typeof value === 'string' ? value.trim() : value))
  @ValidateBy({
    name: 'isUserEmail',
    validator: { validate: (v: unknown) => typeof v === 'string' && isUserEmail(v), defaultMessage: () => 'must be an email address of at most 254 characters' },
  })
  email: string;

  @ApiProperty({ minLength: 10, maxLength: 1024, description: 'Not only whitespace. Stored as a scrypt hash; never returned' })
  @ValidateBy({
    name: 'isUserPassword',
    validator: { validate: (v: unknown) => typeof v === 'string' && isUserPassword(v), defaultMessage: () => 'must be 10 to 1024 characters, not all whitespace' },
  })
  password: string;

  @ApiProperty({ maxLength: 200 })
  @IsString() @Length(1, 200)
  name: string;

  @ApiPropertyOptional({ enum: USER_ROLES, default: 'member', description: 'What the user may consent to for an app: an admin grants admin rights' })
  @IsOptionalNonNull() @IsIn(USER_ROLES)
  role?: UserRole;

  @ApiPropertyOptional({ description: 'https URL of a picture (the OIDC `picture` claim)', maxLength: 2000 })
  @IsOptionalNonNull() @IsUrl({ protocols: ['https'], require_protocol: true }) @MaxLength(2000)
  picture?: string;
}

export class UserResponse {
  @ApiProperty() id: string;
  @ApiProperty() tenant_id: string;
  @ApiProperty() email: string;
  @ApiProperty() name: string;
  @ApiProperty({ enum: USER_ROLES }) role: UserRole;
  @ApiProperty({ type: String, nullable: true }) picture: string | null;
  @ApiProperty({ format: 'date-time' }) created_at: string;
}

export class UserList {
  @ApiProperty({ type: [UserResponse] }) users: UserResponse[];
  @ApiProperty({ type: String, nullable: true }) next_cursor: string | null;
}

export class ListUsersQuery extends PageQuery {}
