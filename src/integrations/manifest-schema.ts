/**
 * The integration manifest (SPEC 2.6, CONTRACT "Integrations") as a JSON Schema, checked with
 * ajv: who made it and which version, which way data flows, which runtimes it runs on, what
 * triggers it, how it reaches its upstream (OAuth endpoints and scopes), how it verifies the
 * upstream's webhooks, which item types it writes, the scopes an install asks for (the service's
 * own scope grammar), and how it handles two-way sync.
 */
import Ajv, { ErrorObject } from 'ajv';
import addFormats from 'ajv-formats';
import { isKnownScope } from '../oidc/scopes';
import { isWrittenAsParsed, LOOPBACK_HOSTS } from '../common/target-policy';
import { isPattern } from '../common/type-pattern';
import type { FieldIssue } from '../common/validation';

export const DIRECTIONS = ['read', 'write', 'bidirectional'] as const;

const OAUTH_URL_RULE =
  'must be an https URL (plain http only to a loopback host: 127.0.0.1, [::1], localhost), without user info or port 0, written as URL parsing reads it (no backslash, whitespace or form the parser rewrites)';

/**
 * Why a manifest's OAuth URL may not be used, or undefined: HTTPS, or plain HTTP to a loopback
 * host (local development, as for webhooks), judged on the host WHATWG URL parsing finds, the one
 * a request goes to (`http://127.0.0.1:x@evil.example` names evil.example). User info is refused
 * outright: it is what makes such a URL look like another host, and no upstream needs it. So is
 * a URL the parser rewrites (`https://evil.example\@trusted.example/` goes to evil.example,
 * `https:a.example` and `https:///a.example` to a.example), held to the rule webhook targets are
 * (`isWrittenAsParsed`), and port 0, where nothing listens. Checked at registration and again at
 * each use (the authorize redirect, each token request), for manifests stored before.
 */
export function oauthUrlProblem(text: string): string | undefined {
  const url = URL.canParse(text) ? new URL(text) : undefined;
  const secure = url?.protocol === 'https:' || (url?.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname));
  return secure && !url.username && !url.password && url.port !== '0' && isWrittenAsParsed(text, url) ? undefined : OAUTH_URL_RULE;
}

/** RFC 6749 3.3: a scope token is `1*( %x21 / %x23-5B / %x5D-7E )`; a space would make two scopes of one. */
const OAUTH_SCOPE_RULE = 'must be an OAuth scope token (RFC 6749 3.3): printable ASCII other than space, " and \\';
export const OAUTH_SCOPE_FORMAT = 'oauth-scope';

export const OAUTH_URL_FORMAT = 'oauth-url';
// The rule in words too: the OpenAPI document publishes this schema, and no client knows the format.
const oauthUrl = { type: 'string', format: OAUTH_URL_FORMAT, maxLength: 2000, description: `An OAuth endpoint: ${OAUTH_URL_RULE}` };
const text = (max: number) => ({ type: 'string', minLength: 1, maxLength: max });

/** The manifest's JSON Schema: what registration applies, and what the OpenAPI document publishes for it. */
export const MANIFEST_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'version', 'publisher', 'direction', 'runtime_compatibility'],
  properties: {
    name: { type: 'string', pattern: '^[a-z0-9][a-z0-9_-]*(\\.[a-z0-9][a-z0-9_-]*)*$', maxLength: 200 },
    version: { type: 'string', pattern: '^(0|[1-9]\\d*)\\.(0|[1-9]\\d*)\\.(0|[1-9]\\d*)(-[0-9A-Za-z.-]+)?(\\+[0-9A-Za-z.-]+)?$', maxLength: 100 },
    publisher: text(200),
    description: text(2000),
    direction: { enum: [...DIRECTIONS] },
    runtime_compatibility: { type: 'array', minItems: 1, maxItems: 20, items: text(100), uniqueItems: true },
    triggers: {
      type: 'array',
      maxItems: 50,
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['kind'],
        properties: {
          kind: { enum: ['event', 'schedule', 'webhook', 'manual'] },
          event: text(100),
          schedule: text(100),
          description: text(500),
        },
      },
    },
    oauth: {
      type: 'object',
      additionalProperties: false,
      // RFC 6749 4.1.1: an authorization request names its client.
      required: ['authorize_url', 'token_url', 'client_id'],
      properties: {
        authorize_url: oauthUrl,
        token_url: oauthUrl,
        scopes: { type: 'array', maxItems: 100, items: { ...text(200), format: OAUTH_SCOPE_FORMAT, description: `A scope of the upstream: ${OAUTH_SCOPE_RULE}` }, uniqueItems: true },
        client_id: text(500),
      },
    },
    webhook_verification: {
      type: 'object',
      additionalProperties: false,
      required: ['scheme'],
      properties: {
        scheme: { enum: ['hmac-sha256', 'standard-webhooks', 'none'] },
        header: text(100),
        tolerance_seconds: { type: 'integer', minimum: 0, maximum: 86400 },
      },
    },
    target_types: { type: 'array', maxItems: 100, items: text(200), uniqueItems: true },
    permissions: { type: 'array', maxItems: 100, items: text(200), uniqueItems: true },
    bidirectional: {
      type: 'object',
      additionalProperties: false,
      required: ['conflict_policy'],
      properties: {
        conflict_policy: { enum: ['service_wins', 'upstream_wins', 'newest_wins', 'manual'] },
        echo_suppression: { type: 'boolean' },
      },
    },
  },
} as const;

const ajv = new Ajv({ allErrors: true, strict: false, logger: false });
addFormats(ajv);
// A format, not a check after the schema, so that a bad URL is named with the other schema errors.
ajv.addFormat(OAUTH_URL_FORMAT, { type: 'string', validate: (text: string) => oauthUrlProblem(text) === undefined });
ajv.addFormat(OAUTH_SCOPE_FORMAT, { type: 'string', validate: /^[\x21\x23-\x5B\x5D-\x7E]+$/ });
const validate = ajv.compile(MANIFEST_SCHEMA);

export interface Manifest {
  name: string;
  version: string;
  publisher: string;
  description?: string;
  direction: (typeof DIRECTIONS)[number];
  runtime_compatibility: string[];
  triggers?: Array<{ kind: string; event?: string; schedule?: string; description?: string }>;
  /** `client_id` is required at registration; a manifest stored before that may lack it (see ConnectionsService). */
  oauth?: { authorize_url: string; token_url: string; scopes?: string[]; client_id?: string };
  webhook_verification?: { scheme: string; header?: string; tolerance_seconds?: number };
  target_types?: string[];
  permissions?: string[];
  bidirectional?: { conflict_policy: string; echo_suppression?: boolean };
}

const fieldOf = (e: ErrorObject) => {
  const base = e.instancePath.replace(/^\//, '').replace(/\//g, '.');
  const extra = e.keyword === 'required' ? e.params.missingProperty : e.keyword === 'additionalProperties' ? e.params.additionalProperty : undefined;
  return ['manifest', base, extra].filter(Boolean).join('.');
};

/** Every problem of a manifest, each naming its field (`manifest.oauth.token_url`). */
export function manifestIssues(manifest: unknown): FieldIssue[] {
  if (!validate(manifest)) {
    return (validate.errors ?? []).map((e) => ({
      field: fieldOf(e),
      message:
        e.keyword === 'additionalProperties'
          ? 'is not a manifest field'
          : e.keyword === 'format' && e.params.format === OAUTH_URL_FORMAT
            ? OAUTH_URL_RULE
            : e.keyword === 'format' && e.params.format === OAUTH_SCOPE_FORMAT
              ? OAUTH_SCOPE_RULE
              : (e.message ?? 'is invalid'),
    }));
  }
  const m = manifest as Manifest;
  const issues: FieldIssue[] = [];
  (m.permissions ?? []).forEach((s, i) => {
    if (!isKnownScope(s)) issues.push({ field: `manifest.permissions.${i}`, message: 'is not a scope of this service (SPEC 5.4 grammar, or openid, profile, email)' });
  });
  (m.target_types ?? []).forEach((t, i) => {
    if (!isPattern(t)) issues.push({ field: `manifest.target_types.${i}`, message: 'must be a type name or pattern such as "acme.task" or "acme.*"' });
  });
  if (m.direction === 'bidirectional' && !m.bidirectional) issues.push({ field: 'manifest.bidirectional', message: 'is required when direction is bidirectional' });
  return issues;
}

/** One line for a person deciding whether to install it. */
export function summarize(m: Manifest): string {
  const flow = m.direction === 'read' ? 'reads data into' : m.direction === 'write' ? 'writes data out of' : 'syncs data both ways with';
  const types = m.target_types?.length ? ` items of ${m.target_types.join(', ')}` : '';
  const asks = m.permissions?.length ? `; asks for ${m.permissions.join(', ')}` : '';
  const upstream = m.oauth ? `; connects to ${new URL(m.oauth.authorize_url).host} with OAuth` : '';
  // "runs on item.created, every 15 minutes": an event is what it runs on, a schedule says when.
  const triggers = m.triggers?.length ? `; runs ${m.triggers.map((t) => (t.event ? `on ${t.event}` : (t.schedule ?? `on ${t.kind}`))).join(', ')}` : '';
  return `${m.name} ${m.version} by ${m.publisher} ${flow} this service${types ? ` (${types.trim()})` : ''}${asks}${upstream}${triggers}.`;
}
