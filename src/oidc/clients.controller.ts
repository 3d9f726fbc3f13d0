import { Body, Controller, Post } from '@nestjs/common';
import { ApiBearerAuth, ApiCreatedResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { randomBytes } from 'node:crypto';
import { Caller, Requires } from '../auth/decorators';
import type { Principal } from '../auth/principal';
import { validationError } from '../common/validation';
import { ApiErrors } from '../openapi/api-errors.decorator';
import { RegisteredClient, RegisterClientDto } from './clients.dto';
import { OidcProvider } from './oidc-provider';

@ApiTags('oauth')
@ApiBearerAuth()
@Controller('auth/clients')
export class ClientsController {
  constructor(private readonly oidc: OidcProvider) {}

  @Post()
  @Requires({ admin: true })
  @ApiOperation({
    summary: 'Register a first-party OAuth client of the caller\'s tenant (admin)',
    description:
      'RFC 7591 metadata. The client belongs to the tenant (so it may use client_credentials) and carries a default extension grant. ' +
      'Confidential clients get a `client_secret`, shown only here and stored encrypted; `token_endpoint_auth_method: none` makes a public client (PKCE, no secret).',
  })
  @ApiCreatedResponse({ type: RegisteredClient })
  @ApiErrors(400, 401, 403, 429)
  async register(@Caller() p: Principal, @Body() dto: RegisterClientDto): Promise<RegisteredClient> {
    const method = dto.token_endpoint_auth_method ?? 'client_secret_basic';
    const grants = dto.grant_types ?? ['authorization_code', 'refresh_token'];
    const given = Object.fromEntries(Object.entries(dto).filter(([, v]) => v !== undefined));
    const metadata = {
      response_types: grants.includes('authorization_code') ? ['code'] : [],
      ...given,
      grant_types: grants,
      token_endpoint_auth_method: method,
      client_id: randomBytes(24).toString('base64url'),
      ...(method === 'none' ? {} : { client_secret: randomBytes(32).toString('base64url') }),
      client_id_issued_at: Math.floor(Date.now() / 1000),
      tenant_id: p.tenantId,
      extension_permissions: dto.extension_permissions ?? {},
    };
    const provider = await this.oidc.get();
    try {
      await provider.Client.validate(metadata as never);
    } catch (err) {
      const e = err as { error?: string; error_description?: string };
      if (e.error) throw validationError([{ field: '(client)', message: e.error_description ?? e.error }], 'The client metadata is not valid');
      throw err;
    }
    await (provider.Client as unknown as { adapter: { upsert(id: string, payload: object, ttl: number): Promise<void> } }).adapter.upsert(metadata.client_id, metadata, 0);
    return metadata as RegisteredClient;
  }
}
