import { ApiProperty } from '@nestjs/swagger';
import { IsObject } from 'class-validator';
import { PageQuery } from '../common/pagination';
import { TextParam } from '../common/validation';
import { DIRECTIONS, MANIFEST_SCHEMA } from './manifest-schema';

export class RegisterIntegrationDto {
  // The schema registration applies (IntegrationsService), published as it is (a copy: the
  // document's generator may add to what it is given). `required` there lists the manifest's own
  // fields, so the property's own requiredness is `selfRequired`.
  @ApiProperty({
    ...(structuredClone(MANIFEST_SCHEMA) as unknown as { type: 'object'; properties: Record<string, object>; additionalProperties: false; required: string[] }),
    selfRequired: true,
    description:
      'The manifest, checked against this schema; then each of `permissions` must be a scope of this service, each of `target_types` a type name ' +
      'or pattern, and `bidirectional` is required when `direction` is bidirectional. Each bad field is named in details.fields.',
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
  @TextParam({ minLength: 1, maxLength: 200, description: 'Only this manifest name (every version of it)' })
  name?: string;
}
