/**
 * The model and fast-check commands of test/oauth-model.e2e-spec.ts: one tenant, two users (an
 * admin and a member, whose roles may change and who may be deleted and replaced), two
 * confidential clients registered by the tenant's admin key (B also for client credentials), the
 * grants of each (user, client) pair and every token handed out. What each answer must be is
 * written from SPEC 5.2, 5.4, 5.7, 5.8, CONTRACT "OAuth / OIDC", the README's "OAuth 2.1 and
 * OpenID Connect" and docs/oauth.md, independently of src/oidc:
 * - a user's access token is good for the scopes it was issued with that its grant still holds
 *   and the user's role allows now (docs "An access token is good for the scopes it was issued
 *   with that its grant still holds"; "its tokens are resolved with the user's role as it is now");
 * - a client-credentials token for the scopes it was issued with that its client is still
 *   registered for; a secret rotation deletes them (docs "Client updates", "Secret rotation");
 * - narrowing a client removes the scopes from every grant of it, a widening gives no grant
 *   anything (docs "Client updates");
 * - a consent decides again on the scopes it asked about and keeps the rest; an Allow that gives
 *   nothing makes no grant, and `access_denied` (docs "Consent"; README "Code flow");
 * - revoking an access token ends it alone, a refresh token its whole grant (SPEC 5.7); revoking
 *   a grant, deleting its user or replaying a used refresh token (400 `token_reuse_detected`,
 *   SPEC 5.2.6) ends every token of the grant at once.
 */
import { createHash, randomBytes } from 'node:crypto';
import fc from 'fast-check';
import request from 'supertest';
import type { Response } from 'supertest';
import { bearer, TestApp, uniqueName } from './app';
import { browse, field } from './browse';

export const REDIRECT_URI = 'https://app.example.com/callback';
export const PASSWORD = 'correct horse battery';
/** Every scope a client may be registered for, besides `openid`, which both always keep. */
export const POOL = ['profile', 'email', 'offline_access', 'core.note:read', 'core.note:write', 'metadata.types:write'] as const;
/** No box on the consent page: asked for, they come with any approval (README "Code flow"). */
const NO_BOX = new Set(['openid', 'offline_access']);
/** What only an admin user may give (README "Scopes"). */
const ADMIN_ONLY = new Set(['metadata.types:write']);
const OIDC = new Set(['openid', 'profile', 'email']);
const isApi = (s: string) => !OIDC.has(s) && s !== 'offline_access';

export type Role = 'admin' | 'member';

export interface MUser {
  id: string;
  email: string;
  role: Role;
  alive: boolean;
}

export interface MClient {
  id: string;
  secret: string;
  scope: Set<string>;
  cc: boolean;
}

export interface MGrant {
  user: MUser;
  client: MClient;
  scopes: Set<string>;
  alive: boolean;
}

export interface MAccess {
  value: string;
  client: MClient;
  /** The grant of a user's token; none for client credentials. */
  grant?: MGrant;
  issued: Set<string>;
  revoked: boolean;
  /** A client-credentials token's secret generation at issuance: a rotation deletes it. */
  secretGen: number;
  /** Dead in the model and answered so once: later checks may skip it (the final check does not). */
  seenDead: boolean;
  label: string;
}

export interface MRefresh {
  value: string;
  client: MClient;
  grant: MGrant;
  /** What the code gave (a refresh asks for no scope, so every rotation keeps it). */
  chain: Set<string>;
  used: boolean;
  label: string;
}

export class Model {
  users: MUser[] = [];
  clients: MClient[] = [];
  grants: MGrant[] = [];
  access: MAccess[] = [];
  refresh: MRefresh[] = [];
  secretGen = new Map<MClient, number>();
  issued = 0;

  grantOf(user: MUser, client: MClient): MGrant | undefined {
    return this.grants.find((g) => g.alive && g.user === user && g.client === client);
  }

  endGrant(g: MGrant | undefined): void {
    if (g) g.alive = false;
  }

  live(t: MAccess): boolean {
    if (t.revoked) return false;
    if (t.grant) return t.grant.alive && t.grant.user.alive;
    return this.secretGen.get(t.client) === t.secretGen;
  }

  /** The scopes the token acts with now (SPEC 5.4 and the docs lines in the header). */
  effective(t: MAccess): Set<string> {
    if (!this.live(t)) return new Set();
    if (t.grant) return withinRole(inter(t.issued, t.grant.scopes), t.grant.user.role);
    return inter(t.issued, t.client.scope);
  }

  refreshLive(r: MRefresh): boolean {
    return !r.used && r.grant.alive && r.grant.user.alive;
  }
}

export interface Real {
  t: TestApp;
  adminKey: string;
  /** A note of the tenant, read to tell whether a token may read notes (SPEC 7 rule 4: 404 when it may not). */
  noteId: string;
}

const inter = (a: Set<string>, b: Set<string>) => new Set([...a].filter((s) => b.has(s)));
const withinRole = (s: Set<string>, role: Role) => new Set([...s].filter((x) => role === 'admin' || !ADMIN_ONLY.has(x)));
const setOf = (scope: unknown) => new Set(typeof scope === 'string' && scope ? scope.split(' ') : []);
const show = (s: Set<string>) => [...s].sort().join(' ');
const sameSet = (a: Set<string>, b: Set<string>) => show(a) === show(b);
const short = (res: Response) => `${res.status} ${(res.text ?? '').slice(0, 300)}`;
export const subset = (mask: number) => POOL.filter((_, i) => mask & (1 << i));

function fail(what: string, res?: Response): never {
  throw new Error(res ? `${what}; got ${short(res)}` : what);
}

/** Exploration aid (MODEL_TRACE): how often each command ended each way. */
export const tally = new Map<string, number>();
const note = (k: string) => tally.set(k, (tally.get(k) ?? 0) + 1);

/** A redirect's path and query on the service. */
const local = (r: Real, location: string) => {
  const u = new URL(location, r.t.url);
  return u.pathname + u.search;
};
const tokenRequest = (r: Real, c: MClient, form: Record<string, string>) => r.t.http.post('/auth/oauth2/token').auth(c.id, c.secret).type('form').send(form);

// ---------------------------------------------------------------------------------------------
// Checks after every command

/**
 * Every token against the model: the API (a note read, a note written), introspection (`active`
 * and `scope`) and userinfo (`email` only when held); every refresh token's `active`. A token
 * answered dead once is skipped afterwards unless `all`.
 */
export async function checkAll(m: Model, r: Real, all = false): Promise<void> {
  const problems: string[] = [];
  await Promise.all(m.access.filter((t) => all || !t.seenDead).map((t) => checkAccess(m, r, t, problems, all)));
  await Promise.all(
    m.refresh.filter((x) => all || m.refreshLive(x) || !x.used).map(async (x) => {
      const res = await r.t.http.post('/auth/oauth2/introspect').auth(x.client.id, x.client.secret).type('form').send({ token: x.value });
      const want = m.refreshLive(x);
      if (res.status !== 200 || res.body.active !== want) problems.push(`introspection of refresh token ${x.label}: want active ${want}; got ${short(res)}`);
    }),
  );
  if (problems.length) throw new Error(problems.join('\n'));
}

async function checkAccess(m: Model, r: Real, t: MAccess, problems: string[], all: boolean): Promise<void> {
  const live = m.live(t);
  const eff = m.effective(t);
  const what = `access token ${t.label} (${live ? `live, holds "${show(eff)}"` : 'dead'})`;
  const [read, write, intro, info] = await Promise.all([
    r.t.http.get(`/items/${r.noteId}`).set(bearer(t.value)),
    r.t.http.post('/items').set(bearer(t.value)).send({ type: 'core.note', properties: { title: 'by a token' } }),
    r.t.http.post('/auth/oauth2/introspect').auth(t.client.id, t.client.secret).type('form').send({ token: t.value }),
    r.t.http.get('/auth/oauth2/userinfo').set(bearer(t.value)),
  ]);
  const canRead = eff.has('core.note:read') || eff.has('core.note:write');
  const readWant = !live ? 401 : canRead ? 200 : 404;
  if (read.status !== readWant) problems.push(`${what}: GET /items/{note} want ${readWant}; got ${short(read)}`);
  // A type the token may not even read is answered as if it did not exist (400 invalid_type); one it only reads, 403.
  const writeWant = !live ? '401' : eff.has('core.note:write') ? '201' : canRead ? '403' : '400 invalid_type';
  const writeGot = write.status === 400 ? `400 ${write.body?.error?.code}` : String(write.status);
  if (writeGot !== writeWant) problems.push(`${what}: POST /items want ${writeWant}; got ${short(write)}`);
  if (intro.status !== 200 || intro.body.active !== live) problems.push(`${what}: introspection want active ${live}; got ${short(intro)}`);
  else if (live) {
    // The token's scope as it acts now (docs: introspection reports what scopesStillHeld leaves); offline_access is never an access token's.
    const want = new Set([...eff].filter((s) => s !== 'offline_access'));
    if (!sameSet(setOf(intro.body.scope), want)) problems.push(`${what}: introspection scope want "${show(want)}"; got "${intro.body.scope ?? ''}"`);
  }
  // README: userinfo answers by the OIDC scopes the token was issued with and its grant still holds; without openid 403.
  const infoWant = !live ? 401 : eff.has('openid') ? 200 : 403;
  // A client-credentials token stands for no user: userinfo has nobody to answer for (401 invalid_token, README).
  const ccAnswer = live && !t.grant && info.status === 401 && info.body.error === 'invalid_token';
  if (info.status !== infoWant && !ccAnswer) problems.push(`${what}: userinfo want ${infoWant}; got ${short(info)}`);
  else if (infoWant === 200) {
    if ('email' in info.body !== eff.has('email')) problems.push(`${what}: userinfo email present ${'email' in info.body}, want ${eff.has('email')}`);
    if (info.body.sub !== t.grant?.user.id) problems.push(`${what}: userinfo sub ${info.body.sub}, want ${t.grant?.user.id}`);
  }
  if (all) {
    // docs "Decisions": introspection answers a client about its own tokens only.
    const other = m.clients.find((c) => c !== t.client)!;
    const res = await r.t.http.post('/auth/oauth2/introspect').auth(other.id, other.secret).type('form').send({ token: t.value });
    if (res.status !== 200 || res.body.active !== false) problems.push(`${what}: introspection by the other client want active false; got ${short(res)}`);
  }
  if (!live) t.seenDead = true;
}

// ---------------------------------------------------------------------------------------------
// Commands

type Cmd = fc.AsyncCommand<Model, Real, boolean>;
const pick = <T>(xs: T[], n: number): T => xs[xs.length - 1 - (n % xs.length)];

/**
 * `user` asks (through `client`) for `openid` (when `withOpenid`) and `ask`, signs in on the real
 * pages and approves with `tick` ticked (prompt=consent, so the consent page is always shown);
 * the client exchanges the code with PKCE.
 */
class Approve implements Cmd {
  constructor(readonly u: number, readonly c: number, readonly withOpenid: boolean, readonly ask: number, readonly tick: number, readonly raw: boolean) {}
  check(m: Model): boolean {
    const user = m.users[this.u];
    if (!user.alive) return false;
    // A page offering nothing but Deny (docs "Consent": only offline_access, or for a member only admin scopes, without
    // openid) is left out: there is no Allow to press.
    const { boxes, usable, refusedAtOnce } = this.shape(m);
    return refusedAtOnce || usable.has('openid') || boxes.length > 0;
  }
  private shape(m: Model) {
    const user = m.users[this.u];
    const client = m.clients[this.c];
    // Mostly what the client is registered for now; one ask in four as drawn, unregistered scopes and all.
    const asked = [...(this.withOpenid ? ['openid'] : []), ...subset(this.ask).filter((s) => this.raw || client.scope.has(s))];
    const usable = new Set(asked.filter((s) => client.scope.has(s)));
    const boxes = [...usable].filter((s) => !NO_BOX.has(s) && (user.role === 'admin' || !ADMIN_ONLY.has(s)));
    // README "Scopes": a request naming no scope the client can be given is invalid_scope before any sign-in; an
    // unregistered API scope beside a usable one is left out, while an unregistered OIDC scope (or offline_access) is
    // refused as the provider refuses it (docs "Tokens and scopes": "as the provider names an unregistered OIDC scope").
    const refusedAtOnce = usable.size === 0 || asked.some((s) => !isApi(s) && !client.scope.has(s));
    return { user, client, asked, usable, boxes, refusedAtOnce };
  }
  async run(m: Model, r: Real): Promise<void> {
    const { user, client, asked, usable, boxes, refusedAtOnce } = this.shape(m);
    const ticked = boxes.filter((s) => subset(this.tick).includes(s as (typeof POOL)[number]));
    const agent = request.agent(r.t.url);
    const verifier = randomBytes(32).toString('base64url');
    const query = new URLSearchParams({
      client_id: client.id,
      redirect_uri: REDIRECT_URI,
      response_type: 'code',
      scope: asked.join(' '),
      state: 'st',
      prompt: 'consent',
      code_challenge: createHash('sha256').update(verifier).digest('base64url'),
      code_challenge_method: 'S256',
    });
    const start = await browse(agent, r.t.url, `/auth/authorize?${query}`);
    if (refusedAtOnce) {
      const error = start.leftTo && new URL(start.leftTo).searchParams.get('error');
      if (error !== 'invalid_scope') fail(`${this}: want invalid_scope at the redirect URI, got ${start.leftTo ?? start.path}`);
      note('approve: invalid_scope');
      return;
    }
    if (!start.page || !start.path.startsWith('/auth/sign-in')) fail(`${this}: want the sign-in page, got ${start.leftTo ?? start.path}`);
    const signedIn = await agent.post('/auth/sign-in').type('form').send({ uid: field(start.page, 'uid'), csrf: field(start.page, 'csrf'), email: user.email, password: PASSWORD });
    if (signedIn.status !== 303) fail(`${this}: sign-in`, signedIn);
    const consent = await browse(agent, r.t.url, local(r, signedIn.headers.location));
    if (!consent.page) fail(`${this}: want the consent page, got ${consent.leftTo}`);
    const form = new URLSearchParams({ uid: field(consent.page, 'uid'), csrf: field(consent.page, 'csrf'), decision: 'approve' });
    for (const s of ticked) form.append('scope', s);
    form.append('scopes_shown', '1');
    const decision = await agent.post('/auth/authorize/decision').type('form').send(form.toString());
    if (decision.status !== 303) fail(`${this}: decision`, decision);
    const back = await browse(agent, r.t.url, local(r, decision.headers.location));
    const callback = new URL(back.leftTo ?? fail(`${this}: no redirect to the app (${back.path})`));

    // docs "Consent": ticked boxes granted, unticked (and a member's admin-only asks) refused, `openid`/`offline_access` given with any Allow.
    const given = new Set([...ticked, ...[...usable].filter((s) => NO_BOX.has(s))]);
    const refused = [...usable].filter((s) => !NO_BOX.has(s) && !given.has(s));
    const grantsAnything = [...given].some((s) => s !== 'offline_access');
    const grant = m.grantOf(user, client);
    if (grant) for (const s of refused) grant.scopes.delete(s);
    if (!grantsAnything) {
      if (callback.searchParams.get('error') !== 'access_denied') fail(`${this}: an Allow giving nothing: want access_denied, got ${callback}`);
      note(`approve: access_denied${grant ? ', grant narrowed' : ''}`);
      return;
    }
    const code = callback.searchParams.get('code') ?? fail(`${this}: no code in ${callback}`);
    const g = grant ?? { user, client, scopes: new Set<string>(), alive: true };
    if (!grant) m.grants.push(g);
    for (const s of given) g.scopes.add(s);
    const res = await tokenRequest(r, client, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, code_verifier: verifier });
    if (res.status !== 200) fail(`${this}: code exchange`, res);
    const issued = new Set([...given].filter((s) => s !== 'offline_access'));
    if (!sameSet(setOf(res.body.scope), issued)) fail(`${this}: token response scope "${res.body.scope}", want "${show(issued)}"`);
    if (!String(res.body.access_token).startsWith('svc_at_') || !String(res.body.refresh_token).startsWith('svc_rt_')) fail(`${this}: token prefixes`, res);
    const label = `#${++m.issued} (${user.role} u${this.u}, client ${'AB'[this.c]})`;
    m.access.push({ value: res.body.access_token, client, grant: g, issued, revoked: false, secretGen: -1, seenDead: false, label });
    m.refresh.push({ value: res.body.refresh_token, client, grant: g, chain: given, used: false, label });
    note(`approve: tokens (${user.role}${grant ? ', existing grant' : ''})`);
  }
  toString() {
    return `approve(u${this.u}, ${'AB'[this.c]}, ask ${this.raw ? '' : 'registered of '}"${[...(this.withOpenid ? ['openid'] : []), ...subset(this.ask)].join(' ')}", tick "${subset(this.tick).join(' ')}")`;
  }
}

/** The client refreshes the n-th newest refresh token, used or not. */
class Refresh implements Cmd {
  constructor(readonly n: number) {}
  check(m: Model) {
    return m.refresh.length > 0;
  }
  async run(m: Model, r: Real): Promise<void> {
    const rt = pick(m.refresh, this.n);
    const res = await tokenRequest(r, rt.client, { grant_type: 'refresh_token', refresh_token: rt.value });
    if (rt.used) {
      // SPEC 5.2.6: a used refresh token is 400 token_reuse_detected and ends the grant; docs "Refresh reuse": every later replay answers the same.
      // A used refresh token stays a tombstone even when its grant, or its user, is gone (SPEC 5.2.6: reuse is always detected).
      if (res.status !== 400 || res.body.error !== 'token_reuse_detected') fail(`${this} of used ${rt.label}: want 400 token_reuse_detected`, res);
      note(`refresh: reuse${!rt.grant.user.alive ? ' after user deletion' : rt.grant.alive ? ', grant revoked' : ''}`);
      m.endGrant(rt.grant);
      return;
    }
    if (!m.refreshLive(rt)) {
      if (res.status !== 400 || res.body.error !== 'invalid_grant') fail(`${this} of dead ${rt.label}: want 400 invalid_grant`, res);
      note('refresh: dead grant');
      return;
    }
    if (res.status !== 200) fail(`${this} of ${rt.label}`, res);
    rt.used = true;
    const g = rt.grant;
    // docs "Tokens and scopes": a refresh is held to what the grant holds now (and the role allows), offline_access never in the access token.
    const issued = new Set([...withinRole(inter(rt.chain, g.scopes), g.user.role)].filter((s) => s !== 'offline_access'));
    if (!sameSet(setOf(res.body.scope), issued)) fail(`${this} of ${rt.label}: token response scope "${res.body.scope ?? ''}", want "${show(issued)}"`);
    const label = `#${++m.issued} (refresh of ${rt.label})`;
    m.access.push({ value: res.body.access_token, client: rt.client, grant: g, issued, revoked: false, secretGen: -1, seenDead: false, label });
    m.refresh.push({ value: res.body.refresh_token, client: rt.client, grant: g, chain: rt.chain, used: false, label });
    note(`refresh: rotated${issued.size < [...rt.chain].filter((x) => x !== 'offline_access').length ? ', narrowed' : ''}`);
  }
  toString() {
    return `refresh(${this.n})`;
  }
}

/** RFC 7009 revocation of the n-th newest access or refresh token, by its own client or by the other (which revokes nothing). */
class Revoke implements Cmd {
  constructor(readonly kind: 'access' | 'refresh', readonly n: number, readonly byOther: boolean) {}
  check(m: Model) {
    // A used refresh token's revocation is left out: what it should do to its grant (a tombstone) is written nowhere.
    return this.kind === 'access' ? m.access.length > 0 : m.refresh.some((x) => !x.used);
  }
  async run(m: Model, r: Real): Promise<void> {
    const tok = this.kind === 'access' ? pick(m.access, this.n) : pick(m.refresh.filter((x) => !x.used), this.n);
    const by = this.byOther ? m.clients.find((c) => c !== tok.client)! : tok.client;
    const res = await r.t.http.post('/auth/oauth2/revoke').auth(by.id, by.secret).type('form').send({ token: tok.value });
    if (res.status !== 200) fail(`${this} of ${tok.label}: want 200`, res);
    note(`revoke ${this.kind}${by !== tok.client ? ' by the other client' : ''}`);
    if (by !== tok.client) return; // docs: another client's token is left alone
    if (this.kind === 'access') (tok as MAccess).revoked = true;
    else m.endGrant((tok as MRefresh).grant.alive ? (tok as MRefresh).grant : undefined);
  }
  toString() {
    return `revoke(${this.kind} ${this.n}${this.byOther ? ', by the other client' : ''})`;
  }
}

/** The user signs in to the account pages, finds the grant of the client in /auth/grants (its scope checked) and revokes it. */
class RevokeGrant implements Cmd {
  constructor(readonly u: number, readonly c: number, readonly how: 'delete' | 'post') {}
  check(m: Model) {
    return m.users[this.u].alive;
  }
  async run(m: Model, r: Real): Promise<void> {
    const user = m.users[this.u];
    const client = m.clients[this.c];
    const agent = request.agent(r.t.url);
    const form = await agent.get('/auth/sign-in?return_to=/auth/grants');
    if (form.status !== 200) fail(`${this}: account sign-in page`, form);
    const signedIn = await agent.post('/auth/sign-in').type('form').send({ return_to: '/auth/grants', csrf: field(form.text, 'csrf'), email: user.email, password: PASSWORD });
    if (signedIn.status !== 303) fail(`${this}: account sign-in`, signedIn);
    const list = await agent.get('/auth/grants').set('Accept', 'application/json');
    if (list.status !== 200) fail(`${this}: GET /auth/grants`, list);
    const grants = list.body.grants as Array<{ id: string; client_id: string; scope: string }>;
    const mine = m.grants.filter((g) => g.alive && g.user === user);
    // SPEC 5.8: one grant per connection, listing its scopes.
    const want = mine.map((g) => `${g.client.id} ${show(g.scopes)}`).sort();
    const got = grants.map((g) => `${g.client_id} ${show(setOf(g.scope))}`).sort();
    if (JSON.stringify(want) !== JSON.stringify(got)) fail(`${this}: /auth/grants lists ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
    const found = grants.find((g) => g.client_id === client.id);
    note(`revokeGrant: ${found ? 'revoked' : 'none'}`);
    if (!found) return;
    const res = this.how === 'delete' ? await agent.delete(`/auth/grants/${found.id}`).set('Accept', 'application/json') : await agent.post(`/auth/grants/${found.id}/revoke`).send({});
    if (res.status >= 300) fail(`${this}: revoke`, res);
    m.endGrant(m.grantOf(user, client));
  }
  toString() {
    return `revokeGrant(u${this.u}, ${'AB'[this.c]}, ${this.how})`;
  }
}

/** The admin key changes the client's registered scope to `openid` and the drawn subset. */
class PatchClient implements Cmd {
  constructor(readonly c: number, readonly mask: number) {}
  check() {
    return true;
  }
  async run(m: Model, r: Real): Promise<void> {
    const client = m.clients[this.c];
    const scope = new Set(['openid', ...subset(this.mask)]);
    const res = await r.t.http.patch(`/auth/clients/${client.id}`).set(bearer(r.adminKey)).send({ scope: [...scope].join(' ') });
    if (res.status !== 200) fail(`${this}`, res);
    client.scope = scope;
    // docs "Client updates": scopes taken away are removed from every user's grant of the client; a widening gives no grant anything.
    for (const g of m.grants) if (g.alive && g.client === client) for (const s of [...g.scopes]) if (!scope.has(s) && g.scopes.delete(s)) note('patchClient: narrowed a live grant');
    note('patchClient');
  }
  toString() {
    return `patchClient(${'AB'[this.c]}, "openid ${subset(this.mask).join(' ')}")`;
  }
}

/** PATCH /users/{id} to the other role (README: it holds for their OAuth tokens from the next request; grants stay). */
class ChangeRole implements Cmd {
  constructor(readonly u: number) {}
  check(m: Model) {
    return m.users[this.u].alive;
  }
  async run(m: Model, r: Real): Promise<void> {
    const user = m.users[this.u];
    const role: Role = user.role === 'admin' ? 'member' : 'admin';
    const res = await r.t.http.patch(`/users/${user.id}`).set(bearer(r.adminKey)).send({ role });
    if (res.status !== 200) fail(`${this}`, res);
    user.role = role;
    note(`changeRole to ${role}${m.grants.some((g) => g.alive && g.user === user && g.scopes.has('metadata.types:write')) ? ', grant holds an admin scope' : ''}`);
  }
  toString() {
    return `changeRole(u${this.u})`;
  }
}

/** DELETE /users/{id} (README: their grants and tokens end with them); a deleted user's slot is filled again by a new user. */
class DeleteOrReplaceUser implements Cmd {
  constructor(readonly u: number, readonly role: Role) {}
  check() {
    return true;
  }
  async run(m: Model, r: Real): Promise<void> {
    const user = m.users[this.u];
    if (user.alive) {
      const res = await r.t.http.delete(`/users/${user.id}`).set(bearer(r.adminKey));
      if (res.status >= 300) fail(`${this}: delete`, res);
      user.alive = false;
      for (const g of m.grants) if (g.user === user) g.alive = false;
      note('deleteUser');
      return;
    }
    m.users[this.u] = await createUser(r, this.role);
    note('replaceUser');
  }
  toString() {
    return `deleteOrReplaceUser(u${this.u}, ${this.role})`;
  }
}

/** POST /auth/clients/{id}/secret: the new secret authenticates the client from now on; its client-credentials tokens end. */
class RotateSecret implements Cmd {
  constructor(readonly c: number) {}
  check() {
    return true;
  }
  async run(m: Model, r: Real): Promise<void> {
    const client = m.clients[this.c];
    const res = await r.t.http.post(`/auth/clients/${client.id}/secret`).set(bearer(r.adminKey));
    if (res.status >= 300 || typeof res.body.client_secret !== 'string') fail(`${this}`, res);
    const old = client.secret;
    client.secret = res.body.client_secret;
    m.secretGen.set(client, (m.secretGen.get(client) ?? 0) + 1);
    note('rotateSecret');
    const stale = await r.t.http.post('/auth/oauth2/token').auth(client.id, old).type('form').send({ grant_type: 'client_credentials', scope: 'core.note:read' });
    if (stale.status !== 401 || stale.body.error !== 'invalid_client') fail(`${this}: the old secret must be invalid_client`, stale);
  }
  toString() {
    return `rotateSecret(${'AB'[this.c]})`;
  }
}

/** Client credentials for the drawn API scopes (README "Scopes": those it is not registered for are left out; none left is invalid_scope). */
class ClientCredentials implements Cmd {
  constructor(readonly c: number, readonly mask: number, readonly raw: boolean) {}
  check(m: Model) {
    return this.asked(m).length > 0;
  }
  /** Mostly what the client is registered for now; one ask in four as drawn. */
  private asked(m: Model) {
    return subset(this.mask).filter((s) => isApi(s) && (this.raw || m.clients[this.c].scope.has(s)));
  }
  async run(m: Model, r: Real): Promise<void> {
    const client = m.clients[this.c];
    const asked = this.asked(m);
    const res = await tokenRequest(r, client, { grant_type: 'client_credentials', scope: asked.join(' ') });
    if (!client.cc) {
      if (res.status !== 400 || res.body.error !== 'unauthorized_client') fail(`${this}: a client not registered for client_credentials`, res);
      note('clientCredentials: unauthorized_client');
      return;
    }
    const issued = new Set(asked.filter((s) => client.scope.has(s)));
    if (!issued.size) {
      if (res.status !== 400 || res.body.error !== 'invalid_scope') fail(`${this}: nothing it may have`, res);
      note('clientCredentials: invalid_scope');
      return;
    }
    // The README says what an unregistered API scope beside a usable one does in an authorization request (left out), not
    // in client credentials, where the service refuses it as the provider refuses any scope the client is not registered for.
    if (issued.size < asked.length && res.status === 400 && res.body.error === 'invalid_scope') return void note('clientCredentials: invalid_scope beside a usable scope');
    if (res.status !== 200) fail(`${this}`, res);
    if (!sameSet(setOf(res.body.scope), issued)) fail(`${this}: token response scope "${res.body.scope}", want "${show(issued)}"`);
    const label = `#${++m.issued} (client credentials of ${'AB'[this.c]})`;
    m.access.push({ value: res.body.access_token, client, issued, revoked: false, secretGen: m.secretGen.get(client) ?? 0, seenDead: false, label });
    note('clientCredentials: token');
  }
  toString() {
    return `clientCredentials(${'AB'[this.c]}, ${this.raw ? '' : 'registered of '}"${subset(this.mask).filter(isApi).join(' ')}")`;
  }
}

/** Runs the command, then every check against the model. */
class Checked implements Cmd {
  constructor(readonly cmd: Cmd) {}
  check(m: Readonly<Model>) {
    return this.cmd.check(m);
  }
  async run(m: Model, r: Real): Promise<void> {
    await this.cmd.run(m, r);
    try {
      await checkAll(m, r);
    } catch (e) {
      throw new Error(`after ${this.cmd}: ${(e as Error).message}`);
    }
  }
  toString() {
    return String(this.cmd);
  }
}

const user = fc.nat({ max: 1 });
const client = fc.nat({ max: 1 });
const mask = fc.nat({ max: (1 << POOL.length) - 1 });
const small = fc.nat({ max: 5 });

const approve = fc.tuple(user, client, fc.nat({ max: 3 }), mask, mask, fc.nat({ max: 3 })).map(([u, c, o, a, t, raw]) => new Checked(new Approve(u, c, o > 0, a, t, raw === 0)));
const refresh = small.map((n) => new Checked(new Refresh(n)));
const revoke = fc.tuple(fc.constantFrom('access' as const, 'refresh' as const), small, fc.nat({ max: 3 })).map(([k, n, o]) => new Checked(new Revoke(k, n, o === 0)));

/** Approvals to start from, so that the drawn commands find tokens to act on. */
export const FIRST = fc.array(approve, { minLength: 2, maxLength: 4 });
/** Drawn evenly from the list: approvals, refreshes and revocations, the commands that make and end tokens, come more often. */
export const COMMANDS = [
  approve,
  approve,
  approve,
  refresh,
  refresh,
  refresh,
  revoke,
  revoke,
  fc.tuple(user, client, fc.constantFrom('delete' as const, 'post' as const)).map(([u, c, h]) => new Checked(new RevokeGrant(u, c, h))),
  fc.tuple(client, mask).map(([c, s]) => new Checked(new PatchClient(c, s))),
  fc.tuple(client, mask).map(([c, s]) => new Checked(new PatchClient(c, s))),
  user.map((u) => new Checked(new ChangeRole(u))),
  user.map((u) => new Checked(new ChangeRole(u))),
  fc.tuple(user, fc.constantFrom('admin' as const, 'member' as const)).map(([u, role]) => new Checked(new DeleteOrReplaceUser(u, role))),
  client.map((c) => new Checked(new RotateSecret(c))),
  fc.tuple(mask, fc.nat({ max: 3 })).map(([s, raw]) => new Checked(new ClientCredentials(1, s, raw === 0))),
  fc.tuple(client, mask, fc.nat({ max: 3 })).map(([c, s, raw]) => new Checked(new ClientCredentials(c, s, raw === 0))),
];

export async function createUser(r: Real, role: Role): Promise<MUser> {
  const email = `${uniqueName('u')}@example.com`;
  const res = await r.t.http.post('/users').set(bearer(r.adminKey)).send({ email, password: PASSWORD, name: 'Model user', role });
  if (res.status !== 201) fail('create user', res);
  return { id: res.body.id, email, role, alive: true };
}

export async function createClient(r: Real, cc: boolean, scope: Set<string>): Promise<MClient> {
  const grant_types = ['authorization_code', 'refresh_token', ...(cc ? ['client_credentials'] : [])];
  const res = await r.t.http
    .post('/auth/clients')
    .set(bearer(r.adminKey))
    .send({ client_name: cc ? 'Model app B' : 'Model app A', redirect_uris: [REDIRECT_URI], grant_types, scope: [...scope].join(' ') });
  if (res.status !== 201) fail('register client', res);
  return { id: res.body.client_id, secret: res.body.client_secret, scope, cc };
}
