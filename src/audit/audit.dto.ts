import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn } from 'class-validator';
import { PageQuery } from '../common/pagination';
import { IsOptionalNonNull } from '../common/validation';

export const AUDIT_ACTIONS = ['auth.grant.created', 'auth.grant.revoked'] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

export class AuditEvent {
  @ApiProperty() id: string;
  @ApiProperty({ enum: AUDIT_ACTIONS }) action: AuditAction;
  @ApiProperty({ type: String, nullable: true, description: 'The verified OAuth client' }) client_id: string | null;
  @ApiProperty({ type: String, nullable: true }) user_id: string | null;
  @ApiProperty({ type: String, nullable: true, description: 'The OAuth grant' }) grant_id: string | null;
  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    description: 'auth.grant.created: `source` (authorization_code or device), `created` (first consent, or false for a re-consent), `scope`; auth.grant.revoked: `by` (user, revocation_endpoint, token_reuse, user_deleted or client_deleted)',
  })
  details: Record<string, unknown>;
  @ApiProperty({ format: 'date-time' }) created_at: string;
}

export class AuditList {
  @ApiProperty({ type: [AuditEvent] }) events: AuditEvent[];
  @ApiProperty({ type: String, nullable: true }) next_cursor: string | null;
}

export class ListAuditQuery extends PageQuery {
  @ApiPropertyOptional({ enum: AUDIT_ACTIONS })
  @IsOptionalNonNull() @IsIn(AUDIT_ACTIONS)
  action?: AuditAction;
}
