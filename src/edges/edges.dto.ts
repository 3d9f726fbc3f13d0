/** Request bodies, query parameters and response shapes of the edge routes. */
import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { ArrayMaxSize, ArrayNotEmpty, IsArray, IsBoolean, IsIn, IsObject, IsOptional, IsString, ValidateBy } from 'class-validator';
import { PageQuery } from '../common/pagination';
import { DOTTED_NAME_RE, isPattern, PATTERN_RE } from '../common/type-pattern';
import { IsDottedName, IsOptionalNonNull, IsPatternList, IsRfc3339, MaxChars } from '../common/validation';

export const CARDINALITIES = ['one', 'many'] as const;
export type Cardinality = (typeof CARDINALITIES)[number];
export const DIRECTIONS = ['outgoing', 'incoming', 'both'] as const;
export type Direction = (typeof DIRECTIONS)[number];

const IsPatternOrName = () =>
  ValidateBy({
    name: 'isPatternOrName',
    validator: {
      validate: (v: unknown) => typeof v === 'string' && isPattern(v),
      defaultMessage: () => 'must be an edge type name or a pattern such as "acme.*" or "*"',
    },
  });

export class CreateEdgeTypeDto {
  @ApiProperty({ example: 'acme.depends_on', description: 'Dotted lowercase name, unique in the tenant', maxLength: 200, pattern: DOTTED_NAME_RE })
  @IsString() @MaxChars(200) @IsDottedName()
  name: string;

  @ApiProperty({ type: [String], minItems: 1, maxItems: 50, maxLength: 200, pattern: PATTERN_RE, example: ['core.task', 'acme.*'], description: 'Type patterns a source item must match (any of them)' })
  @IsArray() @ArrayNotEmpty() @ArrayMaxSize(50) @IsPatternList()
  source_types: string[];

  @ApiProperty({ type: [String], minItems: 1, maxItems: 50, maxLength: 200, pattern: PATTERN_RE, example: ['core.task'], description: 'Type patterns a target item must match (any of them)' })
  @IsArray() @ArrayNotEmpty() @ArrayMaxSize(50) @IsPatternList()
  target_types: string[];

  @ApiPropertyOptional({ enum: CARDINALITIES, default: 'many', description: '`one`: an item has at most one outgoing edge of this type' })
  @IsOptionalNonNull() @IsIn(CARDINALITIES)
  cardinality?: Cardinality;

  @ApiPropertyOptional({ default: false, description: 'When true, an edge that would close a cycle (self-loops included) is refused with 400 edge_cycle' })
  @IsOptionalNonNull() @IsBoolean()
  acyclic?: boolean;

  @ApiPropertyOptional({ maxLength: 1000 })
  @IsOptionalNonNull() @IsString() @MaxChars(1000)
  description?: string;
}

export class EdgeTypeResponse {
  @ApiProperty({ example: 'acme.depends_on' }) name: string;
  @ApiProperty({ type: [String] }) source_types: string[];
  @ApiProperty({ type: [String] }) target_types: string[];
  @ApiProperty({ enum: CARDINALITIES }) cardinality: Cardinality;
  @ApiProperty() acyclic: boolean;
  @ApiProperty({ type: String, nullable: true }) description: string | null;
  @ApiProperty({ format: 'date-time' }) created_at: string;
}

export class EdgeTypeList {
  @ApiProperty({ type: [EdgeTypeResponse] }) edge_types: EdgeTypeResponse[];
  @ApiProperty({ type: String, nullable: true, description: 'Pass as `cursor` for the next page; null on the last page' })
  next_cursor: string | null;
}

export class CreateEdgeDto {
  @ApiProperty({ example: 'acme.depends_on', description: 'Edge type name', maxLength: 200, pattern: DOTTED_NAME_RE })
  @IsString() @MaxChars(200) @IsDottedName()
  type: string;

  @ApiProperty({ description: 'Id of the item the edge starts from' })
  @IsString() @MaxChars(100)
  source_id: string;

  @ApiProperty({ description: 'Id of the item the edge points to' })
  @IsString() @MaxChars(100)
  target_id: string;

  @ApiPropertyOptional({ type: 'object', additionalProperties: true, description: 'Free-form JSON object stored with the edge', default: {} })
  @IsOptionalNonNull() @IsObject()
  properties?: Record<string, unknown>;
}

export class EdgeResponse {
  @ApiProperty() id: string;
  @ApiProperty({ example: 'acme.depends_on' }) type: string;
  @ApiProperty() source_id: string;
  @ApiProperty() target_id: string;
  @ApiProperty({ type: 'object', additionalProperties: true }) properties: Record<string, unknown>;
  @ApiProperty({ format: 'date-time' }) created_at: string;
}

export class EdgeList {
  @ApiProperty({ type: [EdgeResponse] }) edges: EdgeResponse[];
  @ApiProperty({ type: String, nullable: true, description: 'Pass as `cursor` for the next page; null on the last page' })
  next_cursor: string | null;
}

/** A page of edges, of one edge type name or pattern. */
class EdgeTypeQuery extends PageQuery {
  @ApiPropertyOptional({ description: 'Edge type name or pattern (`acme.*`, `*`)', example: 'acme.depends_on' })
  @IsOptional() @IsPatternOrName()
  type?: string;
}

/** `GET /edges`: the tenant's edges, newest first. */
export class EdgesQuery extends EdgeTypeQuery {
  @ApiPropertyOptional({ format: 'date-time', description: 'created_at >= since' })
  @IsOptional() @IsRfc3339()
  since?: string;

  @ApiPropertyOptional({ format: 'date-time', description: 'created_at < until' })
  @IsOptional() @IsRfc3339()
  until?: string;
}

export class ItemEdgesQuery extends EdgeTypeQuery {
  @ApiPropertyOptional({ enum: DIRECTIONS, default: 'both', description: '`outgoing`: the item is the source; `incoming`: the item is the target' })
  @IsOptional() @IsIn(DIRECTIONS)
  direction?: Direction;
}
