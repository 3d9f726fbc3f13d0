import { MAX_PREVIOUS_SECRET_SECONDS } from '../common/secret-rotation';
import { applyDecorators } from '@nestjs/common';
import { ApiProperty, ApiPropertyOptional, ApiPropertyOptions } from '@nestjs/swagger';
import { ArrayMaxSize, ArrayNotEmpty, ArrayUnique, IsArray, IsBoolean, IsIn, IsInt, IsOptional, IsString, Matches, Max, Min, ValidateBy } from 'class-validator';
import { PageQuery } from '../common/pagination';
import { isPattern } from '../common/type-pattern';
import { IsOptionalNonNull, IsPatternList, MaxChars } from '../common/validation';
import { EVENT_NAMES, isEventPattern, MAX_SUBSCRIPTION_PATTERNS } from '../events/event-catalogue';
import { ApiInteger, ApiIntegerOptional } from '../openapi/api-integer.decorator';
import { chosenSecretProblem } from './signature';
import { HEALTH_WINDOW, PENDING_CAP } from './webhook-health';

const IsEventPatterns = () =>
  ValidateBy({
    name: 'isEventPatterns',
    validator: {
      validate: (v: unknown) => Array.isArray(v) && v.every((p) => typeof p === 'string' && isPattern(p) && isEventPattern(p)),
      defaultMessage: () => `must list event names (${EVENT_NAMES.join(', ')}), patterns such as "item.*", or "*"`,
    },
  });

const NO_REPEATS = 'must not list a pattern twice';
const SECRET_DOC: ApiPropertyOptions = {
  minLength: 16,
  maxLength: 256,
  pattern: '^[!-~]+$',
  description:
    'Signing secret, 16-256 printable characters without spaces; generated (`whsec_…`, 32 random bytes) when omitted. ' +
    'One that starts with `whsec_` is a Standard Webhooks secret: the rest must be 24-64 bytes in padded standard base64, as their libraries decode it; ' +
    'one in another form is used as raw bytes (their `format: "raw"`). Returned only in this response.',
};
const IsSecret = () =>
  applyDecorators(
    IsOptionalNonNull(),
    IsString(),
    Matches(/^[\x21-\x7e]{16,256}$/, { message: 'must be 16-256 printable ASCII characters without spaces' }),
    ValidateBy({
      name: 'isStandardWebhooksSecret',
      validator: {
        validate: (v: unknown) => typeof v !== 'string' || chosenSecretProblem(v) === undefined,
        defaultMessage: (args) => chosenSecretProblem(String(args?.value)) ?? '',
      },
    }),
  );

/** A subscription's `events`, at registration and in a PATCH alike. */
const IsEventList = () =>
  applyDecorators(IsArray(), ArrayNotEmpty(), ArrayMaxSize(MAX_SUBSCRIPTION_PATTERNS), ArrayUnique(undefined, { message: NO_REPEATS }), IsEventPatterns());
/** A subscription's `type_filter` (null: every type), at registration and in a PATCH alike. */
const IsTypeFilter = () =>
  applyDecorators(
    IsOptional(),
    IsArray(),
    ArrayNotEmpty({ message: 'must list at least one type pattern; null (or leaving it out) means every type' }),
    ArrayMaxSize(MAX_SUBSCRIPTION_PATTERNS),
    ArrayUnique(undefined, { message: NO_REPEATS }),
    IsPatternList(),
  );

const EVENTS_DOC: ApiPropertyOptions = { type: [String], minItems: 1, uniqueItems: true, maxItems: MAX_SUBSCRIPTION_PATTERNS, example: ['item.created', 'edge.*'], description: `Event names or patterns: ${EVENT_NAMES.join(', ')}; \`*\` for all` };
const TYPE_FILTER_DOC: ApiPropertyOptions = { type: [String], nullable: true, minItems: 1, uniqueItems: true, maxItems: MAX_SUBSCRIPTION_PATTERNS, example: ['core.note', 'acme.*'], description: 'Limits item events to these type patterns (subtypes included under `parent.*`); null or absent: every type. An empty list is refused: it would select no item event, or read as every type' };

export class CreateWebhookDto {
  @ApiProperty({ example: 'https://example.com/hooks/svc', maxLength: 2048, description: 'HTTPS target (plain http and private addresses only when WEBHOOK_ALLOW_PRIVATE_TARGETS); no whitespace, control characters or backslashes' })
  @IsString() @MaxChars(2048)
  url: string;

  @ApiProperty(EVENTS_DOC)
  @IsEventList()
  events: string[];

  @ApiPropertyOptional(TYPE_FILTER_DOC)
  @IsTypeFilter()
  type_filter?: string[] | null;

  @ApiPropertyOptional(SECRET_DOC)
  @IsSecret()
  secret?: string;

  @ApiPropertyOptional({ default: false, description: 'Registered but receives nothing' })
  @IsOptionalNonNull() @IsBoolean()
  disabled?: boolean;
}

export class UpdateWebhookDto {
  @ApiPropertyOptional({ maxLength: 2048, description: 'The same rules as at registration' })
  @IsOptionalNonNull() @IsString() @MaxChars(2048)
  url?: string;

  @ApiPropertyOptional(EVENTS_DOC)
  @IsOptionalNonNull() @IsEventList()
  events?: string[];

  @ApiPropertyOptional(TYPE_FILTER_DOC)
  @IsTypeFilter()
  type_filter?: string[] | null;

  @ApiPropertyOptional()
  @IsOptionalNonNull() @IsBoolean()
  disabled?: boolean;
}

export class RotateWebhookSecretDto {
  @ApiPropertyOptional(SECRET_DOC)
  @IsSecret()
  secret?: string;

  @ApiIntegerOptional({ minimum: 0, maximum: MAX_PREVIOUS_SECRET_SECONDS, default: 86_400, description: 'Seconds the replaced secret keeps signing deliveries beside the new one, so receivers can switch over; 0 ends it at once' })
  @IsOptionalNonNull() @IsInt() @Min(0) @Max(MAX_PREVIOUS_SECRET_SECONDS)
  expire_previous_in?: number;
}

/**
 * What the webhook's recent deliveries say about its receiver, computed when the webhook is
 * read (webhook-health.ts has the definitions; HEALTH_WINDOW and PENDING_CAP bound the work).
 */
export class WebhookHealth {
  @ApiProperty({ type: String, format: 'date-time', nullable: true, description: 'When the latest attempt was recorded: the later of `last_success_at` and `last_failure_at`; null before any' })
  last_attempt_at: string | null;
  @ApiProperty({ type: String, enum: ['succeeded', 'failed'], nullable: true, description: 'That attempt\'s outcome: `succeeded` (a 2xx) or `failed` (another status, or no answer in time)' })
  last_status: 'succeeded' | 'failed' | null;
  @ApiInteger({ nullable: true, description: 'That attempt\'s HTTP status; null when none came back (timeout, refused connection) or before any attempt' })
  last_status_code: number | null;
  @ApiProperty({ type: String, format: 'date-time', nullable: true, description: `The latest attempt that got a 2xx among the newest ${HEALTH_WINDOW} deliveries; when none of those did, the success of the newest \`succeeded\` delivery; null if none` })
  last_success_at: string | null;
  @ApiProperty({ type: String, format: 'date-time', nullable: true, description: `The latest attempt that did not get a 2xx among the newest ${HEALTH_WINDOW} deliveries; when none of those had one, the last failed attempt of the newest \`failed\` delivery; null if none` })
  last_failure_at: string | null;
  @ApiInteger({ minimum: 0, maximum: HEALTH_WINDOW, description: `Of the newest ${HEALTH_WINDOW} deliveries, newest first up to the first \`succeeded\` one: those attempted that did not succeed (\`failed\`, or \`pending\` with a retry to come); deliveries not attempted yet are passed over. ${HEALTH_WINDOW} means ${HEALTH_WINDOW} or more` })
  consecutive_failures: number;
  @ApiInteger({ minimum: 0, maximum: PENDING_CAP, description: `Deliveries waiting for a first attempt or a retry, counted up to ${PENDING_CAP} (${PENDING_CAP} means ${PENDING_CAP} or more)` })
  pending: number;
}

export class WebhookResponse {
  @ApiProperty() id: string;
  @ApiProperty() url: string;
  @ApiProperty({ type: [String] }) events: string[];
  @ApiProperty({ type: [String], nullable: true }) type_filter: string[] | null;
  @ApiProperty() disabled: boolean;
  /** Only in a creation response, documented there (CreatedWebhookResponse). */
  secret?: string;
  @ApiProperty({ type: String, format: 'date-time', nullable: true, description: 'Until when the secret replaced by the last rotation still signs deliveries beside the current one; null when none does' })
  previous_secret_expires_at: string | null;
  @ApiProperty({ description: 'The credential that registered it; deliveries are what it may read' }) credential_id: string;
  @ApiProperty({ format: 'date-time' }) created_at: string;
  @ApiProperty({ format: 'date-time' }) updated_at: string;
  @ApiProperty({ type: WebhookHealth, description: 'Its receiver\'s health, from its recent deliveries, as of this answer' }) health: WebhookHealth;
}

/** The answer to POST /webhooks: the only one that carries the signing secret. */
export class CreatedWebhookResponse extends WebhookResponse {
  @ApiProperty({ description: 'Signing secret; only in this response' }) secret: string;
}

/** The answer to POST /webhooks/{id}/secret: the new secret, shown once. */
export class RotatedWebhookResponse extends WebhookResponse {
  @ApiProperty({ description: 'The new signing secret; only in this response' }) secret: string;
}

export class WebhookList {
  @ApiProperty({ type: [WebhookResponse] }) webhooks: WebhookResponse[];
  @ApiProperty({ type: String, nullable: true }) next_cursor: string | null;
}

export const WEBHOOK_HEALTH_FILTERS = ['failing'] as const;

export class ListWebhooksQuery extends PageQuery {
  @ApiPropertyOptional({
    enum: WEBHOOK_HEALTH_FILTERS,
    description: `\`failing\`: only webhooks whose \`health.consecutive_failures\` is at least 1 (the newest attempted of their newest ${HEALTH_WINDOW} deliveries has not succeeded)`,
  })
  @IsOptional() @IsIn(WEBHOOK_HEALTH_FILTERS)
  health?: (typeof WEBHOOK_HEALTH_FILTERS)[number];
}

export const DELIVERY_STATUSES = ['pending', 'succeeded', 'failed'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

export class DeliveriesQuery extends PageQuery {
  @ApiPropertyOptional({ enum: DELIVERY_STATUSES })
  @IsOptional() @IsIn(DELIVERY_STATUSES)
  status?: DeliveryStatus;
}

export class DeliveryAttempt {
  @ApiInteger() attempt: number;
  @ApiProperty({ description: 'The X-Svc-Delivery-Id it was sent with' }) id: string;
  @ApiInteger({ nullable: true, description: 'The receiver\'s HTTP status; null when none came back' }) status_code: number | null;
  @ApiInteger() duration_ms: number;
  @ApiProperty({ type: String, nullable: true }) error: string | null;
  @ApiProperty({ format: 'date-time' }) created_at: string;
}

export class WebhookTestResult {
  @ApiProperty({ description: 'The X-Svc-Event-Id (and webhook-id) it was sent with' }) event_id: string;
  @ApiProperty({ description: 'The X-Svc-Delivery-Id it was sent with' }) id: string;
  @ApiInteger({ nullable: true, description: 'The receiver\'s HTTP status; null when none came back' }) status_code: number | null;
  @ApiInteger() duration_ms: number;
  @ApiProperty({ type: String, nullable: true, description: 'Why it did not succeed: the status, a timeout, a refused address, a connection error' }) error: string | null;
  @ApiProperty({ description: 'The receiver answered 2xx' }) succeeded: boolean;
}

export class DeliveryResponse {
  @ApiProperty() id: string;
  @ApiProperty() webhook_id: string;
  @ApiProperty() event: string;
  @ApiProperty({ description: 'X-Svc-Event-Id: the same on every attempt' }) event_id: string;
  @ApiProperty({ enum: DELIVERY_STATUSES }) status: DeliveryStatus;
  @ApiInteger({ description: 'Attempts made so far' }) attempts: number;
  @ApiProperty({ type: String, nullable: true, format: 'date-time' }) next_attempt_at: string | null;
  @ApiInteger({ nullable: true }) last_status_code: number | null;
  @ApiProperty({ type: String, nullable: true }) last_error: string | null;
  @ApiProperty({ type: [DeliveryAttempt] }) attempt_log: DeliveryAttempt[];
  @ApiProperty({ format: 'date-time' }) created_at: string;
}

export class DeliveryList {
  @ApiProperty({ type: [DeliveryResponse] }) deliveries: DeliveryResponse[];
  @ApiProperty({ type: String, nullable: true }) next_cursor: string | null;
}
