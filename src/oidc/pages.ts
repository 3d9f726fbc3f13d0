/**
 * The provider's HTML pages (sign-in, consent, errors, the self-submitting forms): plain,
 * accessible markup with its own small stylesheet and no external asset, every value
 * HTML-escaped. Each form carries a CSRF token (interaction-csrf.ts) next to the interaction it
 * belongs to.
 */
import { createHash } from 'node:crypto';
import { isBlank, UNREADABLE_CHARACTER } from '../common/validation';
import { WRONG_PASSWORD } from '../users/sign-in-refusal';
import { grantsAnything, isIncludedScope, SCOPES_SHOWN } from './consent';
import { parseScope } from './scopes';

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

/** The name rule's unreadable characters (controls, bidi overrides and isolates): an app's name must not reorder or hide what the page says around it. */
const UNSHOWABLE = new RegExp(UNREADABLE_CHARACTER.source, 'gu');
const APP_NAME_MAX = 200;
/** What a page calls an app whose name shows nothing (registered before names had to). */
const UNNAMED_APP = 'An app without a name';

/**
 * An app's name as pages show it: registration now keeps names to the name rule, but a client
 * registered before may hold any text, so what it cannot do to a page is decided here too.
 */
export function shownAppName(name: string): string {
  const chars = [...name.replace(UNSHOWABLE, '')];
  if (isBlank(chars.join(''))) return UNNAMED_APP;
  return chars.length > APP_NAME_MAX ? `${chars.slice(0, APP_NAME_MAX).join('')}…` : chars.join('');
}

const appName = (name: string) => escapeHtml(shownAppName(name));

const STYLE = `
  body { font: 16px/1.5 system-ui, sans-serif; max-width: 32rem; margin: 3rem auto; padding: 0 1rem; color: #1b1b1b; }
  h1 { font-size: 1.5rem; } label { display: block; margin: .75rem 0 .25rem; }
  input[inputmode=email], input[type=password] { width: 100%; padding: .5rem; font: inherit; box-sizing: border-box; }
  button { font: inherit; padding: .5rem 1.25rem; margin: 1rem .5rem 0 0; cursor: pointer; }
  fieldset { border: 1px solid #ccc; margin: 1rem 0; } .error { color: #a00000; } .scope { display: block; margin: .4rem 0; }
  code { background: #f3f3f3; padding: 0 .25rem; }
  h1, h2, p, strong, code, label, legend, li, time, button { overflow-wrap: anywhere; } code { word-break: break-all; }
  .notice { border-left: 4px solid #1b6e2d; padding: .25rem .75rem; }
  .caution { border-left: 4px solid #a06000; padding: .25rem .75rem; }`;

/** A page; one showing what went wrong with a form the user sent says so first in its title, which is read out first. */
function page(title: string, body: string, { script, error, menu }: { script?: string; error?: boolean; menu?: string } = {}): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${error ? 'Error: ' : ''}${escapeHtml(title)}</title><style>${STYLE}</style>${script ? `<script>${script}</script>` : ''}</head>
<body>${menu ?? ''}<main>${body}</main></body></html>`;
}

/**
 * The email field's attributes. Not `type="email"`: browsers refuse to send an address whose part
 * before the @ is not ASCII (HTML's "valid e-mail address"), which the API accepts (RFC 6531), and
 * send a Unicode domain as `xn--`, which is not the address stored: such an account could not
 * sign in from a browser. The keyboard is still the email one.
 */
const EMAIL_INPUT = 'id="email" name="email" type="text" inputmode="email" autocapitalize="none" spellcheck="false" autocomplete="username"';

const hidden = (name: string, value: string) => `<input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value)}">`;

/**
 * What was wrong with a form the user sent: `fields`, the ids of the fields it is about (none: it
 * is about the form as a whole, such as a sign-in refused for a while).
 */
export interface FormProblem {
  text: string;
  fields: readonly string[];
}

/**
 * How a form drawn again shows its problems, without a script (the pages allow none): a problem
 * about one field is said at that field, any other above the form; each field in error is
 * `aria-invalid` and described by what is wrong with it. Focus goes to the first field in error
 * in `order` (`autofocus`), else to the message about the form, so that a screen reader reads
 * what went wrong rather than starting from the top of a page it already heard.
 */
function formProblems(problems: readonly FormProblem[], order: readonly string[]) {
  const idOf = (p: FormProblem) => (p.fields.length === 1 ? `${p.fields[0]}-error` : 'form-error');
  const first = order.find((f) => problems.some((p) => p.fields.includes(f)));
  const message = (p: FormProblem, focus: boolean) => `<p class="error" id="${idOf(p)}"${focus ? ' tabindex="-1" autofocus' : ''}>${escapeHtml(p.text)}</p>`;
  return {
    any: problems.length > 0,
    /** The attributes of field `id`'s input. */
    input(id: string): string {
      const ids = problems.filter((p) => p.fields.includes(id)).map(idOf);
      return ids.length ? ` aria-invalid="true" aria-describedby="${[...new Set(ids)].join(' ')}"${id === first ? ' autofocus' : ''}` : '';
    },
    /** What is wrong with field `id` alone, said between its label and its input. */
    at: (id: string) => problems.filter((p) => p.fields.length === 1 && p.fields[0] === id).map((p) => message(p, false)).join(''),
    /** The problems about several fields or none, above the form; focused when no field is in error. */
    above: () => problems.filter((p) => p.fields.length !== 1).slice(0, 1).map((p) => message(p, first === undefined)).join(''),
  };
}

/**
 * A refused sign-in (users.service.ts) as a problem of the form: a wrong email or password is
 * about both fields; being refused for a while (too many failures) is about neither.
 */
const signInProblem = (error: string | undefined): FormProblem[] => (error ? [{ text: error, fields: error === WRONG_PASSWORD ? ['email', 'password'] : [] }] : []);

/**
 * The fixed confirmations a page may show after an action (`?done=…` on the page the action
 * sent the browser to): a code names one, so no link can make a page say anything else.
 */
const NOTICES = {
  revoked: 'Access revoked: that app can no longer use your account.',
  'signed-out': 'You are signed out everywhere: in every browser, for apps and for these pages. Sign in again to go on.',
  created: 'Your account is created. Sign in with it here to continue.',
} as const;
export type Notice = keyof typeof NOTICES;
/** The notice `code` names, if it is one of those the page shows (`shown`): a grants page never says "signed out". */
export const noticeOf = (code: unknown, shown: readonly Notice[]): Notice | undefined =>
  typeof code === 'string' && Object.hasOwn(NOTICES, code) && shown.includes(code as Notice) ? (code as Notice) : undefined;
const notice = (code?: Notice) => (code ? `<p class="notice" role="status">${escapeHtml(NOTICES[code])}</p>` : '');

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** A moment as the pages show it, "27 Nov 2026, 17:39 UTC", in a <time> holding the ISO form for software. */
export function shownTime(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return escapeHtml(iso);
  const two = (n: number) => String(n).padStart(2, '0');
  const text = `${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()}, ${two(d.getUTCHours())}:${two(d.getUTCMinutes())} UTC`;
  return `<time datetime="${escapeHtml(d.toISOString())}">${text}</time>`;
}

/** The pages' one script (allowed by its hash, `SELF_SUBMITTING_CSP`): a self-submitting form sends itself once the page is read. */
const SUBMIT_SCRIPT = "document.addEventListener('DOMContentLoaded', function () { document.forms[0].submit() });";

/** The Content-Security-Policy of `selfSubmittingPage`: the pages' own, but for its script. */
export const SELF_SUBMITTING_CSP = `default-src 'none'; script-src 'sha256-${createHash('sha256').update(SUBMIT_SCRIPT).digest('base64')}'; style-src 'unsafe-inline'; frame-ancestors 'none'`;

/**
 * A form that sends itself on (the provider's: its `form_post` answer to an app, the confirmation
 * of a logout in a browser without a session, the sign-out before a sign-in as another user), with
 * a button for a browser without JavaScript.
 */
export function selfSubmittingPage(action: string, fields: ReadonlyArray<readonly [string, string]>): string {
  return page(
    'Continuing',
    `<h1>Continuing…</h1>
<form method="post" action="${escapeHtml(action)}">
${fields.map(([name, value]) => hidden(name, value)).join('')}
<noscript><p>JavaScript is off in this browser: continue with the button.</p><button type="submit" autofocus>Continue</button></noscript>
</form>`,
    { script: SUBMIT_SCRIPT },
  );
}

/**
 * The sign-in form: for an app (`uid` of the interaction) or for the account pages (`returnTo`).
 * An app asking the user to choose an account (prompt=select_account) also gets the account the
 * browser is signed in with (`current`) to go on with, beside the form for another one.
 */
export function signInPage(o: { uid?: string; returnTo?: string; csrf: string; clientName?: string; email?: string; error?: string; current?: string; signUp?: string; notice?: Notice }): string {
  const e = formProblems(signInProblem(o.error), ['email', 'password']);
  const keep =
    o.uid && o.current
      ? `<form method="post" action="/auth/select-account">
${hidden('uid', o.uid)}${hidden('csrf', o.csrf)}
<p>You are signed in as <strong>${escapeHtml(o.current)}</strong>.</p>
<button type="submit">Continue as ${escapeHtml(o.current)}</button>
</form>
<h2>Or use another account</h2>`
      : '';
  return page(
    'Sign in',
    `<h1>Sign in</h1>
<p>${o.clientName ? `to continue to <strong>${appName(o.clientName)}</strong>` : 'to manage the apps connected to your account'}</p>
${notice(o.notice)}${e.above()}
${keep}<form method="post" action="/auth/sign-in">
${o.uid ? hidden('uid', o.uid) : hidden('return_to', o.returnTo ?? '/auth/grants')}${hidden('csrf', o.csrf)}
<label for="email">Email</label><input ${EMAIL_INPUT} required value="${escapeHtml(o.email ?? '')}"${e.input('email')}>
<label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required${e.input('password')}>
<button type="submit">Sign in</button>
</form>${o.signUp ? `\n<p>No account yet? <a href="${escapeHtml(o.signUp)}">Create one</a>, then sign in here.</p>` : ''}`,
    { error: e.any },
  );
}

/** What a scope lets the app do, in words, naming the types, edges and extensions literally. */
export function describeScope(scope: string): string {
  const oidc: Record<string, string> = {
    openid: 'Know who you are (your account id)',
    profile: 'See your name, username and picture',
    email: 'See your email address',
    offline_access: 'Stay connected when you are not using it',
  };
  if (oidc[scope]) return oidc[scope];
  const p = parseScope(scope);
  if (!p) return scope;
  if (p.kind === 'metadata') return p.name === 'metadata:read' ? 'Read tags' : p.name === 'metadata:write' ? 'Read and change tags' : `Change ${p.name.slice('metadata.'.length, -':write'.length)}`;
  const what = p.kind === 'type' ? (p.name === '*' ? 'items of every type' : `items of type ${p.name}`) : `edges of type ${p.name}`;
  if (p.access === 'read') return `Read ${what}`;
  // SPEC 5.4: edge write is creating or deleting edges (an edge is never changed).
  return p.kind === 'edge' ? `Read, create and delete ${what}` : `Read, create and change ${what}`;
}

/**
 * What an app asks for, as both consent pages show it (SPEC 5.2): each scope named in words and
 * literally, untickable but those that come with any approval (`isIncludedScope`), then the
 * client's extension grant, which comes with whatever is given. A request of which nothing can be
 * given (`grantsAnything`: no scope shown, or `offline_access` alone) says so, and its page offers
 * no Allow (`decisionButtons`): an Allow would only come back `access_denied`. Every box is ticked,
 * unless `ticked` (a page drawn again) says which the user left ticked: only those are.
 */
function requestedAccess(legend: string, scopes: string[], extensions: Record<string, string>, ticked?: readonly string[]): string {
  if (!grantsAnything(scopes)) return `<fieldset><legend>${legend}</legend>\n<p>This app asks for nothing you can give it.</p>\n</fieldset>`;
  const named = (s: string) => `${escapeHtml(describeScope(s))} <code>${escapeHtml(s)}</code>`;
  const rows = scopes
    .map((s, i) =>
      isIncludedScope(s)
        ? `<p class="scope">${named(s)} (always included)</p>`
        : `<label class="scope"><input type="checkbox" name="scope" value="${escapeHtml(s)}" id="scope-${i}"${!ticked || ticked.includes(s) ? ' checked' : ''}> ${named(s)}</label>`,
    )
    .join('\n');
  // Something is given and none of it is a choice: openid, with offline_access at most.
  const choice = scopes.some((s) => !isIncludedScope(s));
  const granted = Object.entries(extensions);
  return `<fieldset><legend>${legend}${choice ? ' (untick what you do not want to give)' : ''}</legend>
${hidden(SCOPES_SHOWN, '1')}${rows}${choice ? '' : '\n<p>Nothing beyond signing you in.</p>'}
</fieldset>
${
  granted.length
    ? `<p>With every item it may read, it also gets these extension namespaces: ${granted
        .map(([ns, access]) => `<code>${escapeHtml(ns)}</code> (${escapeHtml(access)})`)
        .join(', ')}.</p>`
    : ''
}`;
}

/**
 * An openly registered app (RFC 7591: no tenant's admin registered it) names itself, so another
 * app's name proves nothing (RFC 7591 5): the consent pages say so, and where the answer goes,
 * the one thing the user can check. `redirectUri` is the authorization's (none for a device).
 */
export interface SelfRegistered {
  redirectUri?: string;
}

function selfRegisteredCaution(app: SelfRegistered | undefined): string {
  if (!app) return '';
  let to = '';
  if (app.redirectUri) {
    try {
      const url = new URL(app.redirectUri);
      to = ` Your answer goes to <strong>${escapeHtml(url.host || url.protocol)}</strong>.`;
    } catch {
      // The provider has matched it against the client's registered URIs: it parses.
    }
  }
  return `<p class="caution" role="note">This app registered itself: its name is its own claim, which this service has not checked.${to}</p>
`;
}

/** Allow where it could give anything (`requestedAccess`), and always Deny. */
const decisionButtons = (scopes: string[]) =>
  `${grantsAnything(scopes) ? '<button type="submit" name="decision" value="approve">Allow</button>\n' : ''}<button type="submit" name="decision" value="deny">Deny</button>`;

export function consentPage(o: {
  uid: string;
  csrf: string;
  action: string;
  clientName: string;
  scopes: string[];
  extensions: Record<string, string>;
  selfRegistered?: SelfRegistered;
}): string {
  return page(
    'Allow access',
    `<h1>Allow <strong>${appName(o.clientName)}</strong> to:</h1>
${selfRegisteredCaution(o.selfRegistered)}<form method="post" action="${escapeHtml(o.action)}">
${hidden('uid', o.uid)}${hidden('csrf', o.csrf)}
${requestedAccess('Requested access', o.scopes, o.extensions)}
${decisionButtons(o.scopes)}
</form>`,
  );
}

/** What the app itself is told (`error_description` of its `access_denied`) when `otherWorkspacePage` refuses it. */
export const refusedAppReason = (blocked: boolean | undefined): string =>
  blocked ? 'The workspace\'s admins have blocked this app' : 'This app is only for the users of the workspace it belongs to';

/**
 * An app registered for another tenant (workspace) than the user's, or one the user's tenant
 * blocked (`blocked`): refused. `backTo`, where there is an app to go back to, tells it `access_denied`.
 */
export function otherWorkspacePage(o: { clientName: string; backTo?: string; outcome: string; blocked?: boolean }): string {
  const why = o.blocked ? 'is blocked by your workspace\'s admins: its users cannot connect it.' : 'belongs to another workspace: only its users can connect it.';
  return page(
    'Not available',
    `<h1>Not available</h1>
<p class="error" role="alert"><strong>${appName(o.clientName)}</strong> ${why} ${escapeHtml(o.outcome)}</p>
${o.backTo ? `<p><a href="${escapeHtml(o.backTo)}">Go back to the application</a></p>` : ''}`,
    { error: true },
  );
}

/** The code form; drawn again over a refused code (`code`), it keeps the code to correct. */
export function deviceCodePage(o: { error?: string; code?: string }): string {
  const e = formProblems(o.error ? [{ text: o.error, fields: ['user_code'] }] : [], ['user_code']);
  return page(
    'Connect a device',
    `<h1>Connect a device</h1>
<form method="get" action="/auth/device">
<label for="user_code">The code your device shows</label>${e.at('user_code')}<input id="user_code" name="user_code" autocomplete="one-time-code" required placeholder="XXX-XXXX"${o.code === undefined ? '' : ` value="${escapeHtml(o.code)}"`}${e.input('user_code')}>
<button type="submit">Continue</button>
</form>`,
    { error: e.any },
  );
}

/**
 * The device flow's one page: sign in and consent together, for the code the device shows.
 * Drawn again after a refused sign-in, it keeps the boxes the user unticked unticked (`ticked`).
 */
export function deviceConsentPage(o: {
  userCode: string;
  csrf: string;
  clientName: string;
  scopes: string[];
  extensions: Record<string, string>;
  email?: string;
  error?: string;
  ticked?: readonly string[];
  selfRegistered?: SelfRegistered;
}): string {
  const e = formProblems(signInProblem(o.error), ['email', 'password']);
  return page(
    'Connect a device',
    `<h1>Connect <strong>${appName(o.clientName)}</strong></h1>
${selfRegisteredCaution(o.selfRegistered)}<p>Check that your device shows the code <strong>${escapeHtml(o.userCode)}</strong>. Sign in to allow or deny it.</p>
${e.above()}
<form method="post" action="/auth/device/consent">
${hidden('user_code', o.userCode)}${hidden('csrf', o.csrf)}
<label for="email">Email</label><input ${EMAIL_INPUT} required value="${escapeHtml(o.email ?? '')}"${e.input('email')}>
<label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required${e.input('password')}>
${requestedAccess('It asks to', o.scopes, o.extensions, o.ticked)}
${decisionButtons(o.scopes)}
</form>`,
    { error: e.any },
  );
}

/**
 * The sign-up form; from an app's sign-in page, `returnTo` takes the new user back to it. Drawn
 * again, it says every problem at once (`problems`, by field: name, email, password).
 */
export function signUpPage(o: { csrf: string; email?: string; name?: string; problems?: readonly FormProblem[]; returnTo?: string }): string {
  const e = formProblems(o.problems ?? [], ['name', 'email', 'password']);
  return page(
    'Create an account',
    `<h1>Create an account</h1>
<p>You get a workspace of your own, and you are its admin.${o.returnTo ? ' Then you go back to the app\'s sign-in.' : ''}</p>
${e.above()}
<form method="post" action="/auth/sign-up">
${hidden('csrf', o.csrf)}${o.returnTo ? hidden('return_to', o.returnTo) : ''}
<label for="name">Name</label>${e.at('name')}<input id="name" name="name" autocomplete="name" required maxlength="200" value="${escapeHtml(o.name ?? '')}"${e.input('name')}>
<label for="email">Email</label>${e.at('email')}<input ${EMAIL_INPUT} required value="${escapeHtml(o.email ?? '')}"${e.input('email')}>
<label for="password">Password (at least 10 characters)</label>${e.at('password')}<input id="password" name="password" type="password" autocomplete="new-password" required minlength="10"${e.input('password')}>
<button type="submit">Create account</button>
</form>`,
    { error: e.any },
  );
}

/**
 * The account pages' menu. "Sign out" is the provider's logout (RP-initiated, without a client):
 * it ends this browser's sign-in to apps and to these pages (provider-logout.ts).
 */
const MENU = [['/auth/grants', 'Connected apps'], ['/auth/sessions', 'Sessions'], ['/auth/security', 'Security'], ['/auth/logout', 'Sign out']] as const;
/** The menu, before the page's main content, marking the page it is on (`current`); its separators are not read out. */
const menu = (current: string) =>
  `<nav aria-label="Account">${MENU.map(([href, text]) => `<a href="${href}"${href === current ? ' aria-current="page"' : ''}>${text}</a>`).join('<span aria-hidden="true"> · </span>')}</nav>`;

/** A list page's link to its next page (`href`), when there is one. */
const nextPageLink = (href: string | undefined, text: string) => (href ? `<p><a href="${escapeHtml(href)}">${text}</a></p>` : '');

export function grantsPage(o: { csrf: string; grants: Array<{ id: string; client_name: string; scope: string; created_at: string }>; next?: string; notice?: Notice }): string {
  const rows = o.grants
    .map(
      (g) => `<li><strong>${appName(g.client_name)}</strong>, since ${shownTime(g.created_at)}
<ul>${g.scope.split(' ').filter(Boolean).map((s) => `<li>${escapeHtml(describeScope(s))} <code>${escapeHtml(s)}</code></li>`).join('')}</ul>
<form method="post" action="/auth/grants/${escapeHtml(g.id)}/revoke">${hidden('csrf', o.csrf)}<button type="submit" aria-label="Revoke access for ${appName(g.client_name)}">Revoke access</button></form></li>`,
    )
    .join('\n');
  const list = rows ? `<ul>${rows}</ul>${nextPageLink(o.next, 'Older connected apps')}` : '<p>No app has access to your account.</p>';
  return page('Connected apps', `<h1>Connected apps</h1>${notice(o.notice)}${list}`, { menu: menu('/auth/grants') });
}

/**
 * The sign-ins apps use (the provider's sessions, grants.service.ts). The account pages' own
 * sign-in is a cookie stored nowhere (account-session.ts), so it cannot be listed: the page says
 * how it ends instead.
 */
export function sessionsPage(o: { csrf: string; sessions: Array<{ signed_in_at: string; expires_at: string | null }>; next?: string }): string {
  const rows = o.sessions.map((s) => `<li>Signed in ${shownTime(s.signed_in_at)}${s.expires_at ? `, until ${shownTime(s.expires_at)}` : ''}</li>`).join('');
  return page(
    'Sessions',
    `<h1>Sessions</h1>
<p>Browsers where you are signed in for apps: there an app can connect without asking for your password.</p>
${rows ? `<ul>${rows}</ul>${nextPageLink(o.next, 'Older sessions')}` : '<p>No browser is signed in for apps.</p>'}
<p>Your sign-in to these account pages is not listed. <a href="/auth/logout">Sign out</a> ends it, and the sign-in for apps, in this browser; Sign out everywhere ends both in every browser. Connected apps keep their access either way.</p>
<form method="post" action="/auth/sessions/revoke">${hidden('csrf', o.csrf)}<button type="submit">Sign out everywhere</button></form>`,
    { menu: menu('/auth/sessions') },
  );
}

type SecurityEvent = { action: string; client_id: string | null; client_name?: string; details: Record<string, unknown> };

/** One line of the security page: an app given or refused access, or the account made or changed (what, never a value but the role). */
function securityEvent(e: SecurityEvent, app: (e: SecurityEvent) => string): string {
  if (e.action === 'auth.grant.created') return `access given to ${app(e)}`;
  // An admin disabling the account ended it too.
  if (e.action === 'auth.grant.revoked') return `access revoked from ${app(e)}${e.details.by === 'admin' || e.details.by === 'user_disabled' ? ' by an admin' : ''}`;
  if (e.action === 'user.created') return 'your account was created';
  const changed = Array.isArray(e.details.changed) ? (e.details.changed as unknown[]).filter((f): f is string => typeof f === 'string') : [];
  const role = e.details.role as { from?: unknown; to?: unknown } | undefined;
  const what = changed.map((f) => (f === 'role' && role ? `role (${escapeHtml(String(role.from))} → ${escapeHtml(String(role.to))})` : escapeHtml(f)));
  return `your account was changed: ${what.join(', ')}`;
}

/** What the key form held when it was sent, and what was wrong with it (its expiry: a label is never refused, only replaced), to draw it again. */
export interface KeyFormSent {
  label?: string;
  expires_at?: string;
  problems?: readonly FormProblem[];
}

/**
 * The security page; an admin user also gets the form that creates an admin API key, the one way
 * a tenant made through sign-up (whose first admin is a user) gets a key for the API, with an
 * optional expiry (`datetime-local`, read as UTC, the time the pages show). That form carries a
 * single-use `form_nonce` (AccountForms.spend): sent again, it makes no other key.
 */
export function securityPage(o: {
  email: string;
  events: Array<{ action: string; client_id: string | null; client_name?: string; details: Record<string, unknown>; created_at: string }>;
  keyForm?: { csrf: string; nonce: string } & KeyFormSent;
}): string {
  const app = (e: { client_id: string | null; client_name?: string }) =>
    e.client_name && e.client_name !== e.client_id ? `<strong>${appName(e.client_name)}</strong> (<code>${escapeHtml(e.client_id ?? '')}</code>)` : `<code>${escapeHtml(e.client_id ?? '')}</code>`;
  const rows = o.events
    .map((e) => `<li>${shownTime(e.created_at)}: ${securityEvent(e, app)}</li>`)
    .join('');
  const expiry = formProblems(o.keyForm?.problems ?? [], ['expires_at']);
  const keyForm = o.keyForm
    ? `<h2>API keys</h2><p>An admin API key acts for your whole workspace through the API. It is shown once.</p>
<form method="post" action="/auth/keys">${hidden('csrf', o.keyForm.csrf)}${hidden('form_nonce', o.keyForm.nonce)}
<label for="label">Label</label><input id="label" name="label" value="${escapeHtml(o.keyForm.label ?? '')}" maxlength="200">
<label for="expires_at">Expires (UTC; leave empty for a key that does not expire)</label>${expiry.at('expires_at')}<input id="expires_at" name="expires_at" type="datetime-local" value="${escapeHtml(o.keyForm.expires_at ?? '')}"${expiry.input('expires_at')}>
<button type="submit">Create an admin API key</button></form>`
    : '';
  return page('Security', `<h1>Security</h1><p>Signed in as <strong>${escapeHtml(o.email)}</strong>.</p><h2>Recent activity</h2>${rows ? `<ul>${rows}</ul>` : '<p>Nothing yet.</p>'}${keyForm}`, {
    menu: menu('/auth/security'),
    error: expiry.any,
  });
}

/** A key just created on the account pages: its only showing, with its expiry. */
export function createdKeyPage(o: { key: string; label: string; expiresAt: string | null }): string {
  return page(
    'API key created',
    `<h1>API key created</h1><p>Copy it now: it is not shown again.</p>
<p><strong>${escapeHtml(o.label)}</strong></p><p><code id="key">${escapeHtml(o.key)}</code></p>
<p id="expiry">${o.expiresAt ? `It stops working ${shownTime(o.expiresAt)}.` : 'It does not expire.'}</p>
<p>Send it as <code>Authorization: Bearer …</code>. Manage keys with <code>/keys</code>.</p>`,
    { menu: menu('/auth/security') },
  );
}

/**
 * RP-initiated logout's question. `form` is the provider's own (hidden) form, holding its CSRF
 * token; the buttons submit it, `logout=yes` to end the session.
 */
export function logoutPage(o: { form: string; clientName?: string }): string {
  return page(
    'Sign out',
    `<h1>Sign out</h1>
<p>${o.clientName ? `<strong>${appName(o.clientName)}</strong> asks to sign you out.` : 'Do you want to sign out?'}</p>
${o.form}
<button type="submit" form="op.logoutForm" name="logout" value="yes" autofocus>Yes, sign me out</button>
<button type="submit" form="op.logoutForm">No, stay signed in</button>`,
  );
}

export function messagePage(title: string, message: string): string {
  return page(title, `<h1>${escapeHtml(title)}</h1><p role="status">${escapeHtml(message)}</p>`);
}

/** A form whose CSRF token did not verify. */
export function formExpiredPage(advice = 'Reload the page and try again.'): string {
  return errorPage('Form expired', `This form could not be verified. ${advice}`);
}

/** An error; `link`, where there is somewhere to go on to (signing in again, back to a list). */
export function errorPage(title: string, message: string, link?: { href: string; text: string }): string {
  const onward = link ? `<p><a href="${escapeHtml(link.href)}">${escapeHtml(link.text)}</a></p>` : '';
  return page(title, `<h1>${escapeHtml(title)}</h1><p class="error" role="alert">${escapeHtml(message)}</p>${onward}`, { error: true });
}

/**
 * The provider's error page (provider-errors.ts): a sentence for the user, who cannot fix
 * the request, then the provider's words for whoever makes the app.
 */
export function providerErrorPage(error: string, description?: string): string {
  const ours = error === 'server_error' || error === 'temporarily_unavailable';
  const plain = ours
    ? 'This service could not complete the request just now. Try again in a moment, or go back to the app and start again.'
    : 'The app that sent you here made a mistake in its request, or the request expired, so it cannot go on. Go back to the app and start again; if this happens again, tell the app\'s makers.';
  const detail = description ? `${description} (${error})` : error;
  return page(
    'Something went wrong',
    `<h1>Something went wrong</h1><p class="error" role="alert">${escapeHtml(plain)}</p><p>Details for the app's makers: <code>${escapeHtml(detail)}</code></p>`,
    { error: true },
  );
}

/**
 * A page refused by the rate limit (rate-limit.hook.ts), to a browser: when to try again, as the
 * sign-in page says when a sign-in is throttled. `sent`: the request was a form's, and nothing of it was done.
 */
export function rateLimitedPage(retryAfterSeconds: number, sent: boolean): string {
  const wait = retryAfterSeconds === 1 ? '1 second' : `${retryAfterSeconds} seconds`;
  const what = sent ? 'This form was not sent: too' : 'Too';
  return page(
    'Too many requests',
    `<h1>Too many requests</h1><p class="error" id="form-error" tabindex="-1" autofocus>${what} many requests came from your network in the last minute. Wait ${wait}, then try again.</p>`,
    { error: true },
  );
}

/** The answer to a decision made for an account deleted meanwhile (the consent and device pages). */
export const accountGonePage = () => errorPage('Account gone', 'The account that signed in no longer exists.');
