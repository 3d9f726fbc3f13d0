/**
 * Whole-number properties: `type: integer` in the document, because the server refuses
 * fractions there. Query parameters get the same from `IsQueryInt` (common/validation.ts).
 */
import { ApiProperty, ApiPropertyOptional, ApiPropertyOptions } from '@nestjs/swagger';

export const ApiInteger = (options: ApiPropertyOptions = {}) => ApiProperty({ ...options, type: 'integer' } as ApiPropertyOptions);

export const ApiIntegerOptional = (options: ApiPropertyOptions = {}) => ApiPropertyOptional({ ...options, type: 'integer' } as ApiPropertyOptions);
