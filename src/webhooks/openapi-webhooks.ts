/**
 * The deliveries a receiver gets, as OpenAPI 3.1's `webhooks` section (SPEC 6.1-6.3): one POST
 * per event of the catalogue, its body and its headers, so receivers can generate handlers
 * from /openapi.json as they do clients. The bodies are the components the API answers with.
 */
import type { OpenAPIObject } from '@nestjs/swagger';
import { EVENT_NAMES, EventName } from '../events/event-catalogue';

type PathItem = OpenAPIObject['paths'][string];

/** What each event carries beside `event`, and the component that describes it. */
function subjectOf(name: EventName): { field: string; schema: string; summary: string } {
  if (name.startsWith('item.')) return { field: 'item', schema: 'ItemResponse', summary: 'the item as GET /items/{id} shows it to the registering credential' };
  if (name.startsWith('edge.')) return { field: 'edge', schema: 'EdgeResponse', summary: 'the edge' };
  return { field: 'job', schema: 'BulkJobDto', summary: 'the bulk job at its end' };
}

const header = (name: string, description: string, example?: string) => ({
  name,
  in: 'header' as const,
  required: true,
  description,
  schema: { type: 'string', ...(example ? { example } : {}) },
});

const DELIVERY_HEADERS = [
  header('X-Svc-Event', 'The event name'),
  header('X-Svc-Event-Id', 'The event id: the same on every attempt of it (deduplicate on it)'),
  header('X-Svc-Delivery-Id', 'This attempt\'s id: new on every attempt'),
  header(
    'X-Svc-Signature',
    '`t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>" keyed with the secret>`; Stripe\'s `webhooks.constructEvent` verifies it. ' +
      'Refuse a `t` more than 300 s old or 60 s in the future (SPEC 6.2), and verify over the raw body.',
    't=1732300000,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd',
  ),
  header('webhook-id', 'Standard Webhooks: the event id'),
  header('webhook-timestamp', 'Standard Webhooks: unix seconds of this attempt'),
  header('webhook-signature', 'Standard Webhooks: `v1,<base64 signature>`; the `standardwebhooks` libraries verify it with the same secret'),
];

export function openApiWebhooks(): Record<string, PathItem> {
  return Object.fromEntries(
    EVENT_NAMES.map((name) => {
      const subject = subjectOf(name);
      return [
        name,
        {
          post: {
            // The naming rule of the API's operations (openapi/operation-ids.ts): `onItemCreated`.
            operationId: `on${name.replace(/(^|[._])([a-z])/g, (_, _sep, c: string) => c.toUpperCase())}`,
            tags: ['webhooks'],
            // The receiver checks the signature headers below; the request carries no credential of the API's.
            security: [],
            summary: `${name}: {event, ${subject.field}}, ${subject.summary}`,
            description:
              'Sent as soon as the change commits, signed afresh at every attempt. Answer 2xx within WEBHOOK_TIMEOUT_MS; anything else is ' +
              'retried on WEBHOOK_RETRY_SCHEDULE, then the delivery is failed (GET /webhooks/{id}/deliveries). Redirects are not followed.',
            parameters: DELIVERY_HEADERS,
            requestBody: {
              required: true,
              content: {
                'application/json': {
                  schema: {
                    type: 'object',
                    required: ['event', subject.field],
                    properties: { event: { type: 'string', enum: [name] }, [subject.field]: { $ref: `#/components/schemas/${subject.schema}` } },
                  },
                },
              },
            },
            responses: {
              '2XX': { description: 'Received; the delivery is succeeded' },
              default: { description: 'Any other answer, or none in time: the attempt failed and is retried' },
            },
          },
        },
      ];
    }),
  );
}
