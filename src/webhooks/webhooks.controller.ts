import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Query } from '@nestjs/common';
import { ApiAcceptedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Caller, Requires } from '../auth/decorators';
import type { Principal } from '../auth/principal';
import { Created } from '../common/created-location';
import { ParseIdPipe } from '../common/ids';
import { NoStore } from '../common/security-headers';
import { Idempotent } from '../idempotency/idempotent.decorator';
import { ApiErrors } from '../openapi/api-errors.decorator';
import { ApiOAuth } from '../openapi/api-oauth.decorator';
import {
  CreatedWebhookResponse, CreateWebhookDto, DeliveriesQuery, DeliveryList, DeliveryResponse, ListWebhooksQuery, RotatedWebhookResponse, RotateWebhookSecretDto, UpdateWebhookDto,
  WebhookList, WebhookResponse, WebhookTestResult,
} from './webhooks.dto';
import { WebhooksService } from './webhooks.service';

@ApiTags('webhooks')
@Controller('webhooks')
export class WebhooksController {
  constructor(private readonly webhooks: WebhooksService) {}

  @Post()
  @ApiOAuth({ note: 'the webhook receives the events about what the token may read, for as long as its grant (or client secret) lasts.' })
  @Idempotent()
  @NoStore()
  @ApiOperation({
    summary: 'Register a webhook',
    description:
      'Any credential may register one; it receives the selected events about what that credential may read. The `secret` (generated when omitted) appears only in this response. A tenant may have `WEBHOOKS_MAX_PER_TENANT` webhooks (100 by default), a non-admin credential `WEBHOOKS_MAX_PER_CREDENTIAL` of them (10), the OAuth grants of one user `WEBHOOKS_MAX_PER_USER` together (20); past that, 409 `conflict`.',
  })
  @Created({ type: CreatedWebhookResponse, path: '/webhooks/{id}' })
  @ApiErrors(400, 401, 409, 429)
  create(@Caller() caller: Principal, @Body() dto: CreateWebhookDto): Promise<WebhookResponse> {
    return this.webhooks.create(caller, dto);
  }

  @Get()
  @ApiOAuth({ note: 'the webhooks registered by the token\'s grant or client, with no scope the token lacks.' })
  @ApiOperation({
    summary: 'List webhooks, newest first: an admin sees the tenant\'s, other credentials those they registered',
    description: 'Each with its `health`, computed from its recent deliveries; `health=failing` keeps those whose newest attempted delivery has not succeeded.',
  })
  @ApiOkResponse({ type: WebhookList })
  @ApiErrors(400, 401, 429)
  list(@Caller() caller: Principal, @Query() q: ListWebhooksQuery): Promise<WebhookList> {
    return this.webhooks.list(caller, q);
  }

  @Get(':id')
  @ApiOAuth({ note: 'a webhook registered by the token\'s grant or client, with no scope the token lacks.' })
  @ApiOperation({ summary: 'Retrieve a webhook (never its secret)' })
  @ApiOkResponse({ type: WebhookResponse })
  @ApiErrors(400, 401, 404, 429)
  get(@Caller() caller: Principal, @Param('id', ParseIdPipe) id: string): Promise<WebhookResponse> {
    return this.webhooks.get(caller, id);
  }

  @Patch(':id')
  @ApiOAuth({ note: 'a webhook registered by the token\'s grant or client, with no scope the token lacks.' })
  @ApiOperation({ summary: 'Change url, events, type_filter (null clears it) or disabled' })
  @ApiOkResponse({ type: WebhookResponse })
  @ApiErrors(400, 401, 404, 429)
  update(@Caller() caller: Principal, @Param('id', ParseIdPipe) id: string, @Body() dto: UpdateWebhookDto): Promise<WebhookResponse> {
    return this.webhooks.update(caller, id, dto);
  }

  @Post(':id/secret')
  @ApiOAuth({ note: 'a webhook registered by the token\'s grant or client, with no scope the token lacks.' })
  @HttpCode(200)
  @Idempotent()
  @NoStore()
  @ApiOperation({
    summary: 'Rotate a webhook\'s signing secret: the new one is shown once; the old one keeps signing beside it for `expire_previous_in` seconds (a day by default)',
    description:
      'Until then each delivery carries a signature by each secret, the new one first, in `X-Svc-Signature` (`t=…,v1=<new>,v1=<old>`) and `webhook-signature` ' +
      '(`v1,<new> v1,<old>`): receivers verifying with either secret accept it, with both verifier families. A rotation meanwhile drops the older secret. ' +
      'Who may: as for PATCH.',
  })
  @ApiOkResponse({ type: RotatedWebhookResponse })
  @ApiErrors(400, 401, 404, 409, 429)
  rotateSecret(@Caller() caller: Principal, @Param('id', ParseIdPipe) id: string, @Body() dto: RotateWebhookSecretDto): Promise<WebhookResponse> {
    return this.webhooks.rotateSecret(caller, id, dto);
  }

  @Post(':id/test')
  @ApiOAuth({ note: 'a webhook registered by the token\'s grant or client, with no scope the token lacks.' })
  @HttpCode(200)
  @ApiOperation({
    summary: 'Send the webhook a test request now and answer what its receiver said',
    description:
      'One POST of `{"event":"webhook.test","webhook":{"id"}}` with every header and signature a delivery has (`X-Svc-Event: webhook.test`), to check a ' +
      'receiver\'s address and signature code without writing anything. Sent whether or not the webhook is disabled; not a delivery: not listed, ' +
      'never retried; 409 `conflict` while another test request to it is under way. Who may: as for PATCH.',
  })
  @ApiOkResponse({ type: WebhookTestResult })
  @ApiErrors(400, 401, 404, 409, 429)
  test(@Caller() caller: Principal, @Param('id', ParseIdPipe) id: string): Promise<WebhookTestResult> {
    return this.webhooks.test(caller, id);
  }

  @Delete(':id')
  @ApiOAuth({ note: 'a webhook registered by the token\'s grant or client, with no scope the token lacks.' })
  @HttpCode(200)
  @ApiOperation({ summary: 'Remove a webhook and its delivery history; answers the removed webhook' })
  @ApiOkResponse({ type: WebhookResponse })
  @ApiErrors(400, 401, 404, 429)
  remove(@Caller() caller: Principal, @Param('id', ParseIdPipe) id: string): Promise<WebhookResponse> {
    return this.webhooks.remove(caller, id);
  }

  @Get(':id/deliveries')
  @ApiOAuth({ note: 'a webhook registered by the token\'s grant or client, with no scope the token lacks.' })
  @ApiOperation({ summary: 'Deliveries of a webhook, newest first, with every attempt\'s status code, duration and error; filter by `status`' })
  @ApiOkResponse({ type: DeliveryList })
  @ApiErrors(400, 401, 404, 429)
  deliveries(@Caller() caller: Principal, @Param('id', ParseIdPipe) id: string, @Query() q: DeliveriesQuery): Promise<DeliveryList> {
    return this.webhooks.deliveries(caller, id, q);
  }

  @Get(':id/deliveries/:delivery_id')
  @ApiOAuth({ note: 'a webhook registered by the token\'s grant or client, with no scope the token lacks.' })
  @ApiOperation({ summary: 'One delivery of a webhook, with every attempt\'s status code, duration and error' })
  @ApiOkResponse({ type: DeliveryResponse })
  @ApiErrors(400, 401, 404, 429)
  delivery(
    @Caller() caller: Principal,
    @Param('id', ParseIdPipe) id: string,
    @Param('delivery_id', ParseIdPipe) deliveryId: string,
  ): Promise<DeliveryResponse> {
    return this.webhooks.delivery(caller, id, deliveryId);
  }

  @Post(':id/deliveries/:delivery_id/retry')
  @HttpCode(202)
  @Requires({ admin: true })
  @Idempotent()
  @ApiOperation({
    summary: 'Attempt a delivery again now, whatever its state (admin); unless it succeeds, the delivery keeps its status and scheduled retries',
    description: '409 `conflict` while an attempt of it is under way (retry once it has ended), or when the webhook is disabled.',
  })
  @ApiAcceptedResponse({ type: DeliveryResponse })
  @ApiErrors(400, 401, 403, 404, 409, 429)
  retry(
    @Caller() caller: Principal,
    @Param('id', ParseIdPipe) id: string,
    @Param('delivery_id', ParseIdPipe) deliveryId: string,
  ): Promise<DeliveryResponse> {
    return this.webhooks.retry(caller, id, deliveryId);
  }
}
