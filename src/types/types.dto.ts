import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsObject, IsOptional, IsString, ValidateBy } from 'class-validator';
import { ApiInteger } from '../openapi/api-integer.decorator';
import { PageQuery } from '../common/pagination';
import { DOTTED_NAME_RE } from '../common/type-pattern';
import { IsDottedName, IsOptionalNonNull, MaxChars } from '../common/validation';
import { MERGE_POLICIES, MergePolicy } from './merge-policy';

const IsMergePolicyMap = () =>
  ValidateBy({
    name: 'isMergePolicyMap',
    validator: {
      validate: (v: unknown) =>
        v !== null && typeof v === 'object' && !Array.isArray(v) && Object.values(v as object).every((p) => (MERGE_POLICIES as readonly string[]).includes(p)),
      defaultMessage: () => `must map property names to one of ${MERGE_POLICIES.join(', ')}`,
    },
  });

export class UpdateTypeDto {
  @ApiPropertyOptional({ type: 'object', additionalProperties: true, description: 'JSON Schema of `properties`; a property may carry `"searchable": false`' })
  @IsOptionalNonNull() @IsObject()
  schema?: Record<string, unknown>;

  @ApiPropertyOptional({ type: 'object', additionalProperties: { type: 'string', enum: [...MERGE_POLICIES] }, description: 'Per-property conflict policy (default manual)' })
  @IsOptionalNonNull() @IsMergePolicyMap()
  merge_policy?: Record<string, MergePolicy>;
}

export class CreateTypeDto {
  @ApiProperty({ example: 'acme.recipe', description: 'Dotted lowercase name', maxLength: 200, pattern: DOTTED_NAME_RE })
  @IsString() @MaxChars(200) @IsDottedName()
  name: string;

  @ApiPropertyOptional({ example: 'core.note', description: 'The parent type\'s name', maxLength: 200, pattern: DOTTED_NAME_RE })
  @IsOptionalNonNull() @IsString() @IsDottedName()
  parent?: string;

  @ApiProperty({ type: 'object', additionalProperties: true, description: 'JSON Schema of `properties`; a property may carry `"searchable": false`' })
  @IsObject()
  schema: Record<string, unknown>;

  @ApiPropertyOptional({ type: 'object', additionalProperties: { type: 'string', enum: [...MERGE_POLICIES] }, description: 'Per-property conflict policy (default manual)' })
  @IsOptionalNonNull() @IsMergePolicyMap()
  merge_policy?: Record<string, MergePolicy>;
}

export class TypeResponse {
  @ApiProperty() name: string;
  @ApiProperty({ type: String, nullable: true }) parent: string | null;
  @ApiProperty({ type: 'object', additionalProperties: true, description: 'The schema as submitted' }) schema: Record<string, unknown>;
  @ApiProperty({ type: 'object', additionalProperties: true, description: 'The schema items are validated against (parent merged in)' })
  resolved_schema: Record<string, unknown>;
  @ApiProperty({ type: 'object', additionalProperties: { type: 'string' } }) merge_policy: Record<string, MergePolicy>;
  @ApiProperty() core: boolean;
  @ApiInteger({
    description:
      'Bumped on every change (a subtype\'s also when its parent\'s change reaches its resolved schema); items record the version they were last written under as `schema_version`, and fit every later one',
  })
  version: number;
  @ApiProperty({ format: 'date-time' }) created_at: string;
  @ApiProperty({ format: 'date-time' }) updated_at: string;
}

export class TypeList {
  @ApiProperty({ type: [TypeResponse] }) types: TypeResponse[];
  @ApiProperty({ type: String, nullable: true, description: 'Pass as `cursor` for the next page; null on the last page' })
  next_cursor: string | null;
}

export class ListTypesQuery extends PageQuery {
  @IsOptional() @IsIn(['all', 'core', 'tenant'])
  @ApiPropertyOptional({ enum: ['all', 'core', 'tenant'], default: 'all' })
  kind?: 'all' | 'core' | 'tenant';
}
