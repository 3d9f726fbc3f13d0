import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsObject, IsString, MaxLength, MinLength } from 'class-validator';
import { PageQuery } from '../common/pagination';
import { IsOptionalNonNull } from '../common/validation';
import { DIRECTIONS } from './manifest-schema';

export class RegisterIntegrationDto {
  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    description:
      'The manifest: name, version (semver), publisher, direction (read, write, bidirectional), runtime_compatibility, and optionally ' +
      'description, triggers, oauth {authorize_url, token_url, scopes}, webhook_verification, target_types, permissions (scopes), bidirectional',
    example: {
      name: 'acme.tasks',
      version: '1.0.0',
      publisher: 'Acme',
      direction: 'read',
      runtime_compatibility: ['svc>=4.2'],
      target_types: ['core.task'],
      permissions: ['core.task:write'],
    },
  })
  @IsObject()
  manifest: Record<string, unknown>;
}

export class IntegrationRecord {
  @ApiProperty() id: string;
  @ApiProperty() manifest_name: string;
  @ApiProperty() manifest_version: string;
  @ApiProperty() publisher: string;
  @ApiProperty({ enum: DIRECTIONS }) direction: string;
  @ApiProperty({ type: [String] }) runtime_compatibility: string[];
  @ApiProperty({ format: 'date-time' }) registered_at: string;
  @ApiProperty({ type: 'object', additionalProperties: true, description: 'The full manifest, as registered' }) manifest: Record<string, unknown>;
  @ApiProperty({ description: 'One line on what it does and what it asks for' }) summary: string;
}

export class IntegrationList {
  @ApiProperty({ type: [IntegrationRecord] }) integrations: IntegrationRecord[];
  @ApiProperty({ type: String, nullable: true }) next_cursor: string | null;
}

export class ListIntegrationsQuery extends PageQuery {
  @ApiPropertyOptional({ description: 'Only this manifest name (every version of it)' })
  @IsOptionalNonNull() @IsString() @MinLength(1) @MaxLength(200)
  name?: string;
}
