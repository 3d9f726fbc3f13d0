import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn } from 'class-validator';
import { PageQuery } from '../common/pagination';
import { IsOptionalNonNull } from '../common/validation';

export const AUDIT_ACTIONS = [
  'auth.grant.created',
  'auth.grant.revoked',
  'auth.client.created',
  'auth.client.updated',
  'auth.client.deleted',
  'auth.client.secret_rotated',
  'auth.client.blocked',
  'auth.client.unblocked',
  'key.created',
  'key.updated',
  'key.revoked',
  'webhook.created',
  'webhook.updated',
  'webhook.deleted',
  'webhook.secret_rotated',
  'blob.deleted',
  'tenant.created',
  'tenant.deleted',
  'user.created',
  'user.updated',
  'user.deleted',
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/** What `details` holds for each action; the OpenAPI description of the field, and docs/api-reference.md's list. */
const DETAILS_DOC = [
  'Per action. Every action but the auth.grant ones (save an admin\'s revocation) carries `actor`: who did it, `{kind, id}` of the credential: `api_key` (the key\'s id), `user` (an OAuth token for a user, or the account pages: the user\'s id, and `grant_id` for a token), `oauth_client` (a client-credentials token: the client\'s id), `bootstrap` (id null: the server\'s first key) or `open_registration` (id null: a client registered through RFC 7591, recorded in the root tenant, with the registrant\'s client `address` beside `actor`); `actor.tenant_id` when the credential is another tenant\'s (the root tenant\'s admin who made this one). Never a secret, a key, a hash or a token.',
  'auth.grant.created: `source` (authorization_code or device), `created` (first consent, or false for a re-consent), `scope`;',
  'auth.grant.revoked: `by` (user, admin, revocation_endpoint, token_reuse, user_deleted, user_disabled, client_deleted or client_blocked), with `actor` when `by` is admin;',
  'auth.client.created: `client_name`, `grant_types`, `token_endpoint_auth_method`, `scope`; auth.client.updated: `changed` (the metadata fields whose value changed);',
  'auth.client.deleted: `client_name`, `grants_revoked` (how many); auth.client.secret_rotated: `expire_previous_in` (seconds the old secret kept authenticating; 0: none); auth.client.blocked (an openly registered client, for the tenant\'s users): `client_name`, `grants_revoked`; auth.client.unblocked: `client_name` (`client_id` names the client in all six);',
  'key.created: `key_id`, `label`, `role`, `source`; key.updated: `key_id`, `changed` (label, role, default_tier, type_permissions, extension_permissions, edge_permissions: those whose value changed), `role` `{from, to}` when it changed;',
  'key.revoked: `key_id`, `by` (`caller`, or `creator_removed`: the user who made it on the account pages was deleted or demoted);',
  'webhook.created: `webhook_id`, `host` (of its URL; never the URL\'s path, query or the secret), `events`; webhook.updated: `webhook_id`, `changed` (url, events, type_filter, disabled: those whose value changed), `host` when the URL changed; webhook.deleted: `webhook_id`, `host`; webhook.secret_rotated: `webhook_id`, `expire_previous_in`;',
  'blob.deleted: `hash`, `size`, `content_type` (of the deleted record);',
  'tenant.created: `tenant_id`, `name` (recorded in the creator\'s tenant and in the new one, where `admin_key_id` names its first admin key too; a sign-up records it in the new tenant, by its first user); tenant.deleted: `tenant_id`, `name`, `users_deleted`, `clients_deleted` (how many; in the root tenant\'s log: the tenant\'s own goes with it);',
  'user.created: `email`, `role`, `email_verified`, and `disabled: true` for a user created disabled (with `disabled_until` when it has an end); user.updated: `changed` (name, role, picture, email_verified, disabled, disabled_reason, disabled_until, password: those whose value changed; a new password always; a disablement ending at its `disabled_until` writes no row), `role` `{from, to}` when it changed, `grants_revoked` and `keys_revoked` when the user was disabled; user.deleted: `email`, `grants_revoked`, `keys_revoked` (`user_id` names the user in all three).',
].join(' ');

export class AuditEvent {
  @ApiProperty() id: string;
  @ApiProperty({ enum: AUDIT_ACTIONS }) action: AuditAction;
  @ApiProperty({ type: String, nullable: true, description: 'The verified OAuth client; for auth.client.* the client acted on' }) client_id: string | null;
  @ApiProperty({ type: String, nullable: true }) user_id: string | null;
  @ApiProperty({ type: String, nullable: true, description: 'The OAuth grant' }) grant_id: string | null;
  @ApiProperty({ type: 'object', additionalProperties: true, description: DETAILS_DOC })
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

  @ApiPropertyOptional({
    enum: ['desc', 'asc'],
    default: 'desc',
    description:
      '`desc`: newest first. `asc`: oldest first in transaction order, for exporting the log: a row is listed once every transaction that began writing ' +
      'before it has ended, so following `next_cursor` never skips one that commits late; `next_cursor` is set on every page that has rows, the last ' +
      'included (call again with it later for the rows written since; a page shorter than `limit` has caught up).',
  })
  @IsOptionalNonNull() @IsIn(['desc', 'asc'])
  order?: 'desc' | 'asc';
}
