/**
 * The integration manifest (SPEC 2.6, CONTRACT "Integrations") as a JSON Schema, checked with
 * ajv: who made it and which version, which way data flows, which runtimes it runs on, what
 * triggers it, how it reaches its upstream (OAuth endpoints and scopes), how it verifies the
 * upstream's webhooks, which item types it writes, the scopes an install asks for (the service's
 * own scope grammar), and how it handles two-way sync.
 */
import Ajv, { ErrorObject } from 'ajv';
import addFormats from 'ajv-formats';
import { EVENT_NAMES } from '../events/event-catalogue';
import { isKnownScope } from '../oidc/scopes';
import { isWrittenAsParsed, LOOPBACK_HOSTS } from '../common/target-policy';
import { isPattern } from '../common/type-pattern';
import { isReadableName, type FieldIssue } from '../common/validation';

export const DIRECTIONS = ['read', 'write', 'bidirectional'] as const;

const OAUTH_URL_RULE =
  'must be an https URL (plain http only to a loopback host: 127.0.0.1, [::1], localhost), without user info, port 0 or a fragment (RFC 6749 3.1, 3.2), written as URL parsing reads it (no backslash, whitespace or form the parser rewrites)';

/**
 * Why a manifest's OAuth URL may not be used, or undefined: HTTPS, or plain HTTP to a loopback
 * host (local development, as for webhooks), judged on the host WHATWG URL parsing finds, the one
 * a request goes to (`http://127.0.0.1:x@evil.example` names evil.example). User info is refused
 * outright: it is what makes such a URL look like another host, and no upstream needs it. So is
 * a URL the parser rewrites (`https://evil.example\@trusted.example/` goes to evil.example,
 * `https:a.example` and `https:///a.example` to a.example), held to the rule webhook targets are
 * (`isWrittenAsParsed`), port 0, where nothing listens, and a fragment, which RFC 6749 3.1 and 3.2
 * forbid in either endpoint (the authorize redirect would carry it). Checked at registration and again at
 * each use (the authorize redirect, each token request), for manifests stored before.
 */
export function oauthUrlProblem(text: string): string | undefined {
  const url = URL.canParse(text) ? new URL(text) : undefined;
  const secure = url?.protocol === 'https:' || (url?.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname));
  // Written as parsed, the href is the text: a `#` there, even with nothing after it, starts a fragment.
  const fragment = url?.href.includes('#');
  return secure && !url.username && !url.password && url.port !== '0' && !fragment && isWrittenAsParsed(text, url) ? undefined : OAUTH_URL_RULE;
}

/**
 * The manifest's own formats, each a check and the rule in words: the words name a bad field's
 * problem, and are in the published schema too, since no client knows these formats.
 */
const FORMATS = {
  'oauth-url': { validate: (text: string) => oauthUrlProblem(text) === undefined, rule: OAUTH_URL_RULE },
  /** RFC 6749 3.3: a scope token is `1*( %x21 / %x23-5B / %x5D-7E )`; a space would make two scopes of one. */
  'oauth-scope': { validate: /^[\x21\x23-\x5B\x5D-\x7E]+$/, rule: 'must be an OAuth scope token (RFC 6749 3.3): printable ASCII other than space, " and \\' },
  /**
   * The official SemVer 2.0 grammar (semver.org), without build metadata: SemVer 10 says
   * `1.0.0+build.5` is no other version than 1.0.0, and the version names the record (the same
   * name and version twice is 409), so it would be one version registered twice.
   */
  'manifest-version': {
    validate: /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?$/,
    rule: 'must be a SemVer 2.0 version (MAJOR.MINOR.PATCH, an optional pre-release such as -rc.1: dot-separated, no empty identifier, no leading zero in a numeric one), without build metadata (+...), which does not make another version',
  },
  /** Text a person reads (the summary is one line of it): the rule of user and tenant names. */
  'readable-text': { validate: isReadableName, rule: 'must not be blank, nor contain control characters (line breaks, U+2028 and U+2029 included) or bidirectional override characters (U+202A-U+202E, U+2066-U+2069)' },
  /** A description, which no one-line text is made of: paragraphs and tabs allowed, else the rule above. */
  'readable-paragraphs': {
    validate: (text: string) => isReadableName(text.replace(/\r\n|[\n\t]/g, ' ')),
    rule: 'must not be blank, nor contain control characters (but line breaks \\n or \\r\\n and tabs; U+2028 and U+2029 neither) or bidirectional override characters (U+202A-U+202E, U+2066-U+2069)',
  },
  /** RFC 9110 5.1: a field name is a token, `1*tchar`. */
  'header-name': { validate: /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/, rule: "must be an HTTP header name (RFC 9110 token): letters, digits and !#$%&'*+-.^_`|~" },
} as const;
type Format = keyof typeof FORMATS;

const formatted = (format: Format, max: number, what: string) => ({
  type: 'string',
  format,
  maxLength: max,
  description: `${what}: ${FORMATS[format].rule}`,
});
const oauthUrl = formatted('oauth-url', 2000, 'An OAuth endpoint');
const text = (max: number) => ({ ...formatted('readable-text', max, 'Text'), minLength: 1 });
const paragraphs = (max: number) => ({ ...formatted('readable-paragraphs', max, 'Text'), minLength: 1 });

/** The manifest's JSON Schema: what registration applies, and what the OpenAPI document publishes for it. */
export const MANIFEST_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'version', 'publisher', 'direction', 'runtime_compatibility'],
  properties: {
    name: { type: 'string', pattern: '^[a-z0-9][a-z0-9_-]*(\\.[a-z0-9][a-z0-9_-]*)*$', maxLength: 200 },
    version: formatted('manifest-version', 100, 'SemVer 2.0'),
    publisher: text(200),
    description: paragraphs(2000),
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
          description: paragraphs(500),
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
        scopes: { type: 'array', maxItems: 100, items: { ...formatted('oauth-scope', 200, 'A scope of the upstream'), minLength: 1 }, uniqueItems: true },
        client_id: text(500),
      },
    },
    webhook_verification: {
      type: 'object',
      additionalProperties: false,
      required: ['scheme'],
      properties: {
        scheme: { enum: ['hmac-sha256', 'standard-webhooks', 'none'] },
        header: formatted('header-name', 100, 'The header the signature comes in'),
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

/** Teaches an ajv instance the manifest's own formats, as registration checks them (the fuzz tests' judge of the published schema uses it too). */
export function addManifestFormats(ajv: { addFormat(name: string, format: { type: 'string'; validate: RegExp | ((text: string) => boolean) }): unknown }): void {
  for (const [name, { validate }] of Object.entries(FORMATS)) ajv.addFormat(name, { type: 'string', validate });
}

const ajv = new Ajv({ allErrors: true, strict: false, logger: false });
addFormats(ajv);
// Formats, not checks after the schema, so that a bad value is named with the other schema errors.
addManifestFormats(ajv);
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

/** Every problem of a manifest, each naming its field (`manifest.oauth.token_url`), once (an empty text breaks its length and its format). */
export function manifestIssues(manifest: unknown): FieldIssue[] {
  if (!validate(manifest)) {
    const issues: FieldIssue[] = (validate.errors ?? []).map((e) => ({
      field: fieldOf(e),
      message:
        e.keyword === 'additionalProperties'
          ? 'is not a manifest field'
          : e.keyword === 'format'
            ? FORMATS[e.params.format as Format].rule
            : (e.message ?? 'is invalid'),
    }));
    return issues.filter((issue, i) => issues.findIndex((other) => other.field === issue.field) === i);
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
  (m.triggers ?? []).forEach((t, i) => issues.push(...triggerIssues(t, `manifest.triggers.${i}`)));
  return issues;
}

/**
 * A trigger says what its kind needs, and nothing another kind would: the summary shown at install
 * (`summarize`) must not say a manual trigger runs on an event. An event trigger names an event
 * of the catalogue.
 */
function triggerIssues(t: NonNullable<Manifest['triggers']>[number], at: string): FieldIssue[] {
  const needs = t.kind === 'event' ? 'event' : t.kind === 'schedule' ? 'schedule' : undefined;
  const issues: FieldIssue[] = [];
  for (const field of ['event', 'schedule'] as const) {
    if (field === needs && t[field] === undefined) issues.push({ field: `${at}.${field}`, message: `is required when kind is ${t.kind}` });
    if (field !== needs && t[field] !== undefined) issues.push({ field: `${at}.${field}`, message: `is not a field of a ${t.kind} trigger` });
  }
  if (t.kind === 'event' && t.event !== undefined && !(EVENT_NAMES as readonly string[]).includes(t.event)) {
    issues.push({ field: `${at}.event`, message: `must be an event of this service: ${EVENT_NAMES.join(', ')}` });
  }
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
