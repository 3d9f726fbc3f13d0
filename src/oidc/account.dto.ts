/** The JSON answers of the account pages (account.controller.ts) to a caller that asks for JSON, and of an admin's /users/{id}/grants and /auth/clients/{client_id}/grants. */
import { ApiProperty } from '@nestjs/swagger';
import type { ClientGrantView, GrantView, SessionView } from './grants.service';

export class AccountGrant implements GrantView {
  @ApiProperty() id: string;
  @ApiProperty() client_id: string;
  @ApiProperty({ description: 'The client\'s name, or its id when it has none' }) client_name: string;
  @ApiProperty({ description: 'Space-separated: the OIDC and API scopes the grant holds' }) scope: string;
  @ApiProperty({ format: 'date-time' }) created_at: string;
  @ApiProperty({ type: String, format: 'date-time', nullable: true }) expires_at: string | null;
}

export class AccountGrantList {
  @ApiProperty({ type: [AccountGrant], description: 'Newest first' }) grants: AccountGrant[];
  @ApiProperty({ nullable: true, type: String }) next_cursor: string | null;
}

/** A grant as its client's admins list it: with the user who gave it. */
export class ClientGrant extends AccountGrant implements ClientGrantView {
  @ApiProperty({ format: 'uuid', description: 'The user of the tenant who connected the app' }) user_id: string;
}

export class ClientGrantList {
  @ApiProperty({ type: [ClientGrant], description: 'Newest first' }) grants: ClientGrant[];
  @ApiProperty({ nullable: true, type: String }) next_cursor: string | null;
}

export class AccountSession implements SessionView {
  @ApiProperty({ description: 'An opaque id of the session (not its cookie)' }) id: string;
  @ApiProperty({ format: 'date-time' }) signed_in_at: string;
  @ApiProperty({ type: String, format: 'date-time', nullable: true }) expires_at: string | null;
}

export class AccountSessionList {
  @ApiProperty({ type: [AccountSession], description: 'Newest sign-in first' }) sessions: AccountSession[];
  @ApiProperty({ nullable: true, type: String }) next_cursor: string | null;
}
