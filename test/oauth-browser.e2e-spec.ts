/**
 * The provider's pages in a real browser (Debian's Chromium through playwright-core): sign-in
 * and partial consent in the code flow, and the device page, each saved as a screenshot under
 * test-artifacts/screenshots (git-ignored). The tokens are then taken with openid-client, as
 * the app would. Then the same pages as plain HTTP where no browser is needed: which tenant's
 * users a client serves, who may answer a device, what the account pages show.
 */
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import * as oidc from 'openid-client';
import { Browser, chromium, Page } from 'playwright-core';
import request from 'supertest';
import { bearer, bootstrapAdmin, createTenant, startApp, TestApp } from './support/app';
import { browse as browseOn, field } from './support/browse';
import { pollIntervalPassed } from './support/device-flow';
import { expectError } from './support/envelope';
import { Receiver } from './support/receiver';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const SHOTS = path.join(__dirname, '..', 'test-artifacts', 'screenshots');
const REDIRECT = 'https://notes.example.com/callback';

jest.setTimeout(60_000);

/** Signs grace in on the page an authorization request led to, allows the app if asked, and waits until the app is back. */
async function signInAndAllow(p: Page, email = 'grace@example.com', password = 'a long browser password'): Promise<void> {
  await p.getByLabel('Email').fill(email);
  await p.getByLabel('Password').fill(password);
  await p.getByRole('button', { name: 'Sign in' }).click();
  const allow = p.getByRole('button', { name: 'Allow' });
  const back = p.getByText('back in the app');
  await Promise.race([back.waitFor(), allow.waitFor().then(() => allow.click())]);
  await back.waitFor();
}

describe('OAuth pages in Chromium', () => {
  let t: TestApp;
  let browser: Browser;
  let page: Page;
  let rp: oidc.Configuration;
  let tv: oidc.Configuration;
  let admin: string;

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`Chromium not found at ${CHROMIUM}: apt-get install chromium (or set CHROMIUM_PATH)`);
    mkdirSync(SHOTS, { recursive: true });
    t = await startApp({ OAUTH_DEVICE_POLL_INTERVAL: '1' });
    admin = (await bootstrapAdmin(t)).key;
    await t.http.post('/users').set(bearer(admin)).send({ email: 'grace@example.com', password: 'a long browser password', name: 'Grace Hopper' }).expect(201);
    const notes = await t.http
      .post('/auth/clients')
      .set(bearer(admin))
      .send({ client_name: 'Notes web app', redirect_uris: [REDIRECT], scope: 'openid profile core.note:read core.note:write edge.acme.links:read', token_endpoint_auth_method: 'none', extension_permissions: { 'acme.*': 'read' } })
      .expect(201);
    const device = await t.http
      .post('/auth/clients')
      .set(bearer(admin))
      .send({ client_name: 'Kitchen display', grant_types: ['urn:ietf:params:oauth:grant-type:device_code'], scope: 'openid core.note:read core.note:write', token_endpoint_auth_method: 'none' })
      .expect(201);
    const discover = (clientId: string) => oidc.discovery(new URL(t.url), clientId, undefined, oidc.None(), { execute: [oidc.allowInsecureRequests] });
    rp = await discover(notes.body.client_id);
    tv = await discover(device.body.client_id);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
    page = await browser.newPage();
  });
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  it('signs in and consents to part of the request; the token carries exactly the ticked scopes', async () => {
    const verifier = oidc.randomPKCECodeVerifier();
    const url = oidc.buildAuthorizationUrl(rp, {
      redirect_uri: REDIRECT,
      scope: 'openid profile core.note:read core.note:write edge.acme.links:read',
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state: 'browser',
    });
    // The app's callback never leaves the machine: the browser's request for it is answered here.
    let callback: string | undefined;
    await page.route(`${REDIRECT}**`, async (route) => {
      callback = route.request().url();
      await route.fulfill({ status: 200, contentType: 'text/html', body: '<p>back in the app</p>' });
    });

    await page.goto(url.toString());
    await page.getByLabel('Email').waitFor();
    await page.screenshot({ path: path.join(SHOTS, 'sign-in.png'), fullPage: true });
    await page.getByLabel('Email').fill('grace@example.com');
    await page.getByLabel('Password').fill('a long browser password');
    await page.getByRole('button', { name: 'Sign in' }).click();

    await page.getByRole('button', { name: 'Allow' }).waitFor();
    const consent = await page.textContent('main');
    for (const literal of ['core.note:read', 'core.note:write', 'edge.acme.links:read', 'items of type core.note', 'edges of type acme.links', 'acme.*']) {
      expect(consent).toContain(literal);
    }
    await page.screenshot({ path: path.join(SHOTS, 'consent.png'), fullPage: true });
    await page.getByRole('checkbox', { name: /core\.note:write/ }).uncheck();
    await page.getByRole('checkbox', { name: /edge\.acme\.links:read/ }).uncheck();
    await page.getByRole('button', { name: 'Allow' }).click();
    await page.getByText('back in the app').waitFor();

    const tokens = await oidc.authorizationCodeGrant(rp, new URL(callback!), { pkceCodeVerifier: verifier, expectedState: 'browser' });
    expect(tokens.scope!.split(' ').sort()).toEqual(['core.note:read', 'openid', 'profile']);
    expect(tokens.claims()).toMatchObject({ name: 'Grace Hopper' });
    await t.http.get('/items').set(bearer(tokens.access_token)).expect(200);
    // Without metadata:read, tags are not readable, and so not filterable either (the matches would tell them).
    expectError(await t.http.get('/items?tags=secret').set(bearer(tokens.access_token)), 403, 'forbidden');
    expectError(await t.http.get('/search?q=x&tags=secret').set(bearer(tokens.access_token)), 403, 'forbidden');
    expectError(await t.http.post('/items').set(bearer(tokens.access_token)).send({ type: 'core.note', properties: { title: 'no' } }), 403, 'type_not_permitted');
  });

  it('lets a web app on another origin read userinfo with its access token (CORS), never with the browser\'s cookies; the account pages stay closed to it', async () => {
    const context = await browser.newContext();
    const p = await context.newPage();
    let callback: string | undefined;
    await p.route(`${REDIRECT}**`, async (route) => {
      callback = route.request().url();
      await route.fulfill({ status: 200, contentType: 'text/html', body: '<p>back in the app</p>' });
    });
    const verifier = oidc.randomPKCECodeVerifier();
    const challenge = await oidc.calculatePKCECodeChallenge(verifier);
    await p.goto(oidc.buildAuthorizationUrl(rp, { redirect_uri: REDIRECT, scope: 'openid profile', code_challenge: challenge, code_challenge_method: 'S256', state: 'cors' }).toString());
    await signInAndAllow(p);
    const tokens = await oidc.authorizationCodeGrant(rp, new URL(callback!), { pkceCodeVerifier: verifier, expectedState: 'cors' });
    // The browser is signed in to the account pages too.
    await p.goto(`${t.url}/auth/sign-in?return_to=/auth/sessions`);
    await p.getByLabel('Email').fill('grace@example.com');
    await p.getByLabel('Password').fill('a long browser password');
    await p.getByRole('button', { name: 'Sign in' }).click();
    await p.waitForURL(`${t.url}/auth/sessions`);

    // The app's own origin: another port of this machine, in a page that intercepts nothing
    // (Playwright answers every CORS preflight itself where a page intercepts requests).
    const app = new Receiver();
    const appPage = await context.newPage();
    try {
      await appPage.goto(await app.start());
      const seen = await appPage.evaluate(
        async ({ service, token }) => {
          const call = async (path: string, init: RequestInit) => {
            try {
              const res = await fetch(service + path, init);
              return { status: res.status, body: await res.text(), challenge: res.headers.get('WWW-Authenticate') };
            } catch (err) {
              return { failed: (err as Error).name };
            }
          };
          const authorization = { Authorization: `Bearer ${token}` };
          return {
            get: await call('/auth/oauth2/userinfo', { headers: authorization }),
            post: await call('/auth/oauth2/userinfo', { method: 'POST', headers: authorization, body: new URLSearchParams() }),
            alias: await call('/auth/userinfo', { headers: authorization }),
            refused: await call('/auth/oauth2/userinfo', { headers: { Authorization: 'Bearer svc_at_not-a-token' } }),
            withCookies: await call('/auth/oauth2/userinfo', { headers: authorization, credentials: 'include' }),
            signOutEverywhere: await call('/auth/sessions/revoke', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}', credentials: 'include' }),
          };
        },
        { service: t.url, token: tokens.access_token },
      );
      const claims = JSON.stringify({ sub: tokens.claims()!.sub, name: 'Grace Hopper', preferred_username: 'grace@example.com' });
      for (const call of ['get', 'post', 'alias'] as const) expect([call, seen[call]]).toEqual([call, { status: 200, body: claims, challenge: null }]);
      expect(seen.refused).toMatchObject({ status: 401, challenge: expect.stringContaining('error="invalid_token"') });
      // `Access-Control-Allow-Origin: *` lets no request with cookies through, and no account page answers a preflight.
      expect([seen.withCookies, seen.signOutEverywhere]).toEqual([{ failed: 'TypeError' }, { failed: 'TypeError' }]);
      await p.goto(`${t.url}/auth/sessions`);
      expect(new URL(p.url()).pathname).toBe('/auth/sessions');
    } finally {
      await app.stop();
      await context.close();
    }
  });

  it('connects a device through the page its code leads to', async () => {
    const device = await oidc.initiateDeviceAuthorization(tv, { scope: 'openid core.note:read core.note:write' });
    const fresh = await browser.newPage();
    await fresh.goto(device.verification_uri_complete!);
    await fresh.getByRole('button', { name: 'Allow' }).waitFor();
    expect(await fresh.textContent('main')).toContain(device.user_code);
    await fresh.screenshot({ path: path.join(SHOTS, 'device.png'), fullPage: true });
    await fresh.getByLabel('Email').fill('grace@example.com');
    await fresh.getByLabel('Password').fill('a long browser password');
    await fresh.getByRole('checkbox', { name: /core\.note:write/ }).uncheck();
    await fresh.getByRole('button', { name: 'Allow' }).click();
    await fresh.getByText('Device connected').waitFor();
    await fresh.screenshot({ path: path.join(SHOTS, 'device-connected.png'), fullPage: true });

    const tokens = await oidc.pollDeviceAuthorizationGrant(tv, device);
    expect(tokens.scope!.split(' ').sort()).toEqual(['core.note:read', 'openid']);
    expect(tokens.claims()).toMatchObject({ iss: t.url });
  });

  it('gives nothing, not everything, when the user unticks every box', async () => {
    const device = await oidc.initiateDeviceAuthorization(tv, { scope: 'openid core.note:read core.note:write' });
    const p = await browser.newPage();
    await p.goto(device.verification_uri_complete!);
    await p.getByLabel('Email').fill('grace@example.com');
    await p.getByLabel('Password').fill('a long browser password');
    for (const box of await p.getByRole('checkbox').all()) await box.uncheck();
    await p.getByRole('button', { name: 'Allow' }).click();
    await p.getByText('Device connected').waitFor();
    const tokens = await oidc.pollDeviceAuthorizationGrant(tv, device);
    // openid is no box: it comes with any approval (consent.ts), and nothing else does.
    expect(tokens.scope).toBe('openid');
    expect(tokens.id_token).toEqual(expect.any(String));
    expectError(await t.http.post('/items').set(bearer(tokens.access_token)).send({ type: 'core.note', properties: { title: 'no' } }), 400, 'invalid_type');
    const { items } = (await t.http.get('/items').set(bearer(tokens.access_token)).expect(200)).body;
    expect(items).toEqual([]);
    await p.close();
  });

  it('signs out on the service\'s own pages (RP-initiated logout); the next authorization asks to sign in again', async () => {
    const context = await browser.newContext();
    const p = await context.newPage();
    const elsewhere: string[] = [];
    p.on('request', (r) => {
      if (!r.url().startsWith(t.url) && !r.url().startsWith(REDIRECT)) elsewhere.push(r.url());
    });
    await p.route(`${REDIRECT}**`, (route) => route.fulfill({ status: 200, contentType: 'text/html', body: '<p>back in the app</p>' }));
    const authorize = async () => {
      const challenge = await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier());
      await p.goto(oidc.buildAuthorizationUrl(rp, { redirect_uri: REDIRECT, scope: 'openid', code_challenge: challenge, code_challenge_method: 'S256', state: 'out' }).toString());
    };
    await authorize();
    await signInAndAllow(p);

    const neverFramed = (res: { headers(): Record<string, string> } | null) => {
      expect(res!.headers()['x-frame-options']).toBe('DENY');
      expect(res!.headers()['content-security-policy']).toContain("frame-ancestors 'none'");
    };
    // A framed confirmation would let another site click "sign out" for the user; the provider's error pages likewise.
    neverFramed(await p.goto(`${t.url}/auth/oauth2/authorize?client_id=nope`));
    neverFramed(await p.goto(`${t.url}/auth/logout`));
    await p.getByRole('button', { name: 'Yes, sign me out' }).waitFor();
    await p.screenshot({ path: path.join(SHOTS, 'logout.png'), fullPage: true });
    await p.getByRole('button', { name: 'Yes, sign me out' }).click();
    await p.waitForURL(`${t.url}/auth/logout/success`);
    expect(await p.textContent('main')).toMatch(/signed out/i);
    neverFramed(await p.reload());

    await authorize();
    await p.getByLabel('Email').waitFor();
    // The pages load nothing from anywhere else (the provider's stock pages fetch web fonts).
    expect(elsewhere).toEqual([]);
    await context.close();
  });

  it('sends the provider\'s self-submitting forms on under their CSP: form_post back to the app, and a logout without a session', async () => {
    const context = await browser.newContext();
    const p = await context.newPage();
    const blocked: string[] = [];
    p.on('console', (m) => {
      if (m.type() === 'error') blocked.push(m.text());
    });
    let posted: { method: string; body: string } | undefined;
    await p.route(`${REDIRECT}**`, async (route) => {
      posted = { method: route.request().method(), body: route.request().postData() ?? '' };
      await route.fulfill({ status: 200, contentType: 'text/html', body: '<p>back in the app</p>' });
    });
    const verifier = oidc.randomPKCECodeVerifier();
    await p.goto(
      oidc
        .buildAuthorizationUrl(rp, { redirect_uri: REDIRECT, scope: 'openid', code_challenge: await oidc.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', state: 'posted', response_mode: 'form_post' })
        .toString(),
    );
    await signInAndAllow(p);
    expect(posted!.method).toBe('POST');
    const form = new URLSearchParams(posted!.body);
    expect(form.get('state')).toBe('posted');
    const tokens = await oidc.authorizationCodeGrant(rp, new URL(`${REDIRECT}?${form}`), { pkceCodeVerifier: verifier, expectedState: 'posted' });
    expect(tokens.access_token).toMatch(/^svc_at_/);

    const fresh = await browser.newContext();
    const q = await fresh.newPage();
    q.on('console', (m) => {
      if (m.type() === 'error') blocked.push(m.text());
    });
    await q.goto(`${t.url}/auth/logout`);
    await q.waitForURL(`${t.url}/auth/logout/success`);
    expect(await q.getAttribute('html', 'lang')).toBe('en');
    // No script refused by the CSP on the way (Chromium reports each refusal on the console).
    expect(blocked).toEqual([]);
    await fresh.close();
    await context.close();
  });

  it('ends the account pages\' sign-in in this browser too when the user signs out: the next person at a shared computer is not them', async () => {
    await t.http.post('/users').set(bearer(admin)).send({ email: 'kay@example.com', password: 'a long browser password', name: 'Kay', role: 'admin' }).expect(201);
    const context = await browser.newContext();
    const p = await context.newPage();
    await p.route(`${REDIRECT}**`, (route) => route.fulfill({ status: 200, contentType: 'text/html', body: '<p>back in the app</p>' }));
    const signIn = async () => {
      await p.getByLabel('Email').fill('kay@example.com');
      await p.getByLabel('Password').fill('a long browser password');
      await p.getByRole('button', { name: 'Sign in' }).click();
    };
    // Signed in to an app and to the account pages, in one browser.
    const challenge = await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier());
    await p.goto(oidc.buildAuthorizationUrl(rp, { redirect_uri: REDIRECT, scope: 'openid', code_challenge: challenge, code_challenge_method: 'S256', state: 'shared' }).toString());
    await signIn();
    const allow = p.getByRole('button', { name: 'Allow' });
    const back = p.getByText('back in the app');
    await Promise.race([back.waitFor(), allow.waitFor().then(() => allow.click())]);
    await back.waitFor();
    await p.goto(`${t.url}/auth/sign-in?return_to=/auth/security`);
    await signIn();
    await p.getByText('Signed in as kay@example.com').waitFor();
    const csrf = await p.locator('form[action="/auth/keys"] input[name="csrf"]').inputValue();

    // The account pages' own way out: the provider's logout, confirmed.
    await p.getByRole('navigation', { name: 'Account' }).getByRole('link', { name: 'Sign out', exact: true }).click();
    await p.getByRole('button', { name: 'Yes, sign me out' }).click();
    await p.waitForURL(`${t.url}/auth/logout/success`);

    // The next person at this browser is asked to sign in, and cannot use the page's form.
    await p.goto(`${t.url}/auth/security`);
    expect(await p.textContent('main')).not.toContain('kay@example.com');
    expect(new URL(p.url()).pathname).toBe('/auth/sign-in');
    const minted = await context.request.post(`${t.url}/auth/keys`, { form: { csrf, label: 'after sign out' }, maxRedirects: 0 });
    expect(minted.status()).toBe(401);
    expect(minted.headers()['www-authenticate']).toBe('Bearer realm="svc"'); // RFC 9110 15.5.2, as the operation documents
    expect(await t.sql(`SELECT 1 FROM api_keys WHERE label = 'after sign out'`)).toEqual([]);
    await context.close();
  });
});

describe('OAuth pages in Chromium: what a user of a screen reader, a narrow screen or a busy network meets', () => {
  let t: TestApp;
  let browser: Browser;
  let admin: string;
  let longApp: oidc.Configuration;
  /** 200 characters without a space, as an app may be named. */
  const LONG_NAME = 'Acme' + 'Synchronisation'.repeat(13).slice(0, 196);
  const password = 'a long accessible password';
  let addresses = 0;

  /** A browser of its own, from an address of its own (X-Forwarded-For, trusted here), so each test's rate-limit buckets start empty. */
  const freshBrowser = async (viewport = { width: 1024, height: 768 }) => {
    const context = await browser.newContext({ viewport, extraHTTPHeaders: { 'X-Forwarded-For': `203.0.113.${100 + addresses++}` } });
    await context.route(`${REDIRECT}**`, (route) => route.fulfill({ status: 200, contentType: 'text/html', body: '<p>back in the app</p>' }));
    return { context, p: await context.newPage() };
  };
  // Evaluated in the page as text: these tests are compiled without the DOM's types.
  const focused = (p: Page) => p.evaluate<string>('document.activeElement ? document.activeElement.id : ""');
  /** The text of the elements `input`'s aria-describedby names. */
  const description = async (p: Page, input: string) => {
    const ids = ((await p.getAttribute(`#${input}`, 'aria-describedby')) ?? '').split(' ').filter(Boolean);
    return (await Promise.all(ids.map((id) => p.locator(`#${id}`).textContent()))).join(' ');
  };
  const noHorizontalScroll = (p: Page) => p.evaluate<{ scroll: number; client: number }>('({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth })');
  const signInForAccountPages = async (p: Page, to: string) => {
    await p.goto(`${t.url}/auth/sign-in?return_to=${to}`);
    await p.getByLabel('Email').fill('lin@example.com');
    await p.getByLabel('Password').fill(password);
    await p.getByRole('button', { name: 'Sign in' }).click();
    await p.waitForURL(`${t.url}${to}`);
  };

  beforeAll(async () => {
    t = await startApp({ RATE_LIMIT_ENABLED: 'true', RATE_LIMIT_REQUESTS: '10', TRUST_PROXY: 'true', SVC_SIGNUP_ENABLED: 'true' });
    admin = (await bootstrapAdmin(t)).key;
    await t.http.post('/users').set(bearer(admin)).send({ email: 'lin@example.com', password, name: 'Lin', role: 'admin' }).expect(201);
    const app = await t.http
      .post('/auth/clients')
      .set(bearer(admin))
      .send({
        client_name: LONG_NAME,
        redirect_uris: [REDIRECT],
        scope: 'openid acme.projectmanagementworkspaceitemdefinition.subtaskrecord:write edge.acme.projectmanagementworkspacelinkrelation:read',
        token_endpoint_auth_method: 'none',
        extension_permissions: { 'acmeprojectmanagementworkspaceextension.*': 'write' },
      })
      .expect(201);
    longApp = await oidc.discovery(new URL(t.url), app.body.client_id, undefined, oidc.None(), { execute: [oidc.allowInsecureRequests] });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
  });
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  it('answers a sign-in form past the rate limit with a page saying when to try again, with the limit\'s headers; a JSON caller still gets the envelope', async () => {
    const { context, p } = await freshBrowser();
    await p.goto(`${t.url}/auth/sign-in?return_to=/auth/grants`);
    // The password forms' tight limit here is 9 a minute per address: spend it but for one.
    for (let i = 0; i < 8; i++) {
      const res = await context.request.post(`${t.url}/auth/sign-in`, { form: {}, headers: { Accept: 'application/json' }, maxRedirects: 0 });
      expect(res.status()).not.toBe(429);
    }
    await p.getByLabel('Email').fill('lin@example.com');
    await p.getByLabel('Password').fill('not the password');
    await p.getByRole('button', { name: 'Sign in' }).click();
    await p.getByText('The email or the password is not right.').waitFor();
    await p.getByLabel('Password').fill('not the password either');
    const [refused] = await Promise.all([p.waitForResponse((r) => r.url() === `${t.url}/auth/sign-in` && r.request().method() === 'POST'), p.getByRole('button', { name: 'Sign in' }).click()]);
    expect([refused.status(), refused.headers()['content-type'], refused.headers()['x-ratelimit-remaining']]).toEqual([429, 'text/html; charset=utf-8', '0']);
    const retryAfter = Number(refused.headers()['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(refused.headers()['content-security-policy']).toContain("default-src 'none'");
    await p.getByRole('heading', { name: 'Too many requests' }).waitFor();
    expect([await p.title(), await p.getAttribute('html', 'lang')]).toEqual(['Error: Too many requests', 'en']);
    expect(await p.textContent('main')).toMatch(/This form was not sent.*Wait \d+ seconds?, then try again\./);
    expect(await focused(p)).toBe('form-error');
    // The same path to a caller that does not ask for a page: the API's envelope.
    const json = await context.request.post(`${t.url}/auth/sign-in`, { form: {}, headers: { Accept: 'application/json' }, maxRedirects: 0 });
    expect([json.status(), ((await json.json()) as { error: { code: string } }).error.code]).toEqual([429, 'rate_limited']);
    await context.close();
  });

  it('after a refused sign-in and sign-up, marks the fields in error, describes them by the message, focuses the first, and says Error in the title', async () => {
    const { context, p } = await freshBrowser();
    await p.goto(`${t.url}/auth/sign-in?return_to=/auth/grants`);
    await p.getByLabel('Email').fill('lin@example.com');
    await p.getByLabel('Password').fill('not the password');
    await p.getByRole('button', { name: 'Sign in' }).click();
    await p.getByText('The email or the password is not right.').waitFor();
    expect(await p.title()).toBe('Error: Sign in');
    expect(await focused(p)).toBe('email');
    for (const input of ['email', 'password']) {
      expect([input, await p.getAttribute(`#${input}`, 'aria-invalid'), await description(p, input)]).toEqual([input, 'true', 'The email or the password is not right.']);
    }

    await p.goto(`${t.url}/auth/sign-up`);
    expect(await p.getAttribute('#name', 'autocomplete')).toBe('name');
    await p.getByLabel('Name').fill('   ');
    await p.getByLabel('Email').fill('new@example.com');
    await p.getByLabel(/^Password/).fill(' '.repeat(12));
    await p.getByRole('button', { name: 'Create account' }).click();
    await p.getByText('Enter your name.').waitFor();
    expect(await p.title()).toBe('Error: Create an account');
    expect(await focused(p)).toBe('name');
    // Every problem at once, each at its field.
    expect([await description(p, 'name'), await description(p, 'password'), await p.getAttribute('#email', 'aria-invalid')]).toEqual([
      'Enter your name.',
      'The password needs at least 10 characters, not only spaces or invisible ones.',
      null,
    ]);
    await context.close();
  });

  it('signs in from the browser with an email the API took whose part before the @ is not ASCII (RFC 6531)', async () => {
    await t.http.post('/users').set(bearer(admin)).send({ email: 'ünïcödé@example.com', password, name: 'Ünï', role: 'member' }).expect(201);
    const { context, p } = await freshBrowser();
    await p.goto(`${t.url}/auth/sign-in?return_to=/auth/security`);
    expect(await p.getAttribute('#email', 'inputmode')).toBe('email');
    await p.getByLabel('Email').fill('ünïcödé@example.com');
    await p.getByLabel('Password').fill(password);
    await p.getByRole('button', { name: 'Sign in' }).click();
    await p.waitForURL(`${t.url}/auth/security`);
    expect(await p.textContent('main')).toContain('Signed in as ünïcödé@example.com');
    await context.close();
  });

  it('reflows at 320 px: a 200-character app name and long scope codes wrap on the consent, connected apps and security pages', async () => {
    const { context, p } = await freshBrowser({ width: 320, height: 640 });
    const challenge = await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier());
    const scope = 'openid acme.projectmanagementworkspaceitemdefinition.subtaskrecord:write edge.acme.projectmanagementworkspacelinkrelation:read';
    await p.goto(oidc.buildAuthorizationUrl(longApp, { redirect_uri: REDIRECT, scope, code_challenge: challenge, code_challenge_method: 'S256', state: 'narrow' }).toString());
    await p.getByLabel('Email').fill('lin@example.com');
    await p.getByLabel('Password').fill(password);
    expect(['sign-in', await noHorizontalScroll(p)]).toEqual(['sign-in', { scroll: 320, client: 320 }]);
    await p.getByRole('button', { name: 'Sign in' }).click();
    await p.getByRole('button', { name: 'Allow' }).waitFor();
    expect(await p.textContent('h1')).toContain(LONG_NAME);
    expect(['consent', await noHorizontalScroll(p)]).toEqual(['consent', { scroll: 320, client: 320 }]);
    await p.getByRole('button', { name: 'Allow' }).click();
    await p.getByText('back in the app').waitFor();
    await signInForAccountPages(p, '/auth/grants');
    expect(['grants', await noHorizontalScroll(p)]).toEqual(['grants', { scroll: 320, client: 320 }]);
    await p.goto(`${t.url}/auth/security`);
    expect(['security', await noHorizontalScroll(p)]).toEqual(['security', { scroll: 320, client: 320 }]);
    await p.getByRole('button', { name: 'Create an admin API key' }).click();
    await p.getByRole('heading', { name: 'API key created' }).waitFor();
    expect(['key', await noHorizontalScroll(p)]).toEqual(['key', { scroll: 320, client: 320 }]);
    await context.close();

    // Choosing an account (prompt=select_account): a long email wraps in the button going on with it.
    const longEmail = `alongmailboxname@${'alongsubdomainname.'.repeat(4)}example.com`;
    await t.http.post('/users').set(bearer(admin)).send({ email: longEmail, password, name: 'Long', role: 'member' }).expect(201);
    const narrow = await freshBrowser({ width: 320, height: 640 });
    const authorize = (prompt?: string) =>
      narrow.p.goto(oidc.buildAuthorizationUrl(longApp, { redirect_uri: REDIRECT, scope: 'openid', code_challenge: challenge, code_challenge_method: 'S256', state: 'narrow', ...(prompt ? { prompt } : {}) }).toString());
    await authorize();
    await signInAndAllow(narrow.p, longEmail, password);
    await authorize('select_account');
    await narrow.p.getByRole('button', { name: `Continue as ${longEmail}` }).waitFor();
    expect(['select account', await noHorizontalScroll(narrow.p)]).toEqual(['select account', { scroll: 320, client: 320 }]);
    await narrow.context.close();
  });

  it('shows dates readably in UTC with the ISO form in <time>, and confirms a revoke and a sign-out everywhere with a status message', async () => {
    const { context, p } = await freshBrowser();
    const challenge = await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier());
    await p.goto(oidc.buildAuthorizationUrl(longApp, { redirect_uri: REDIRECT, scope: 'openid', code_challenge: challenge, code_challenge_method: 'S256', state: 'dates' }).toString());
    await signInAndAllow(p, 'lin@example.com', password);
    await signInForAccountPages(p, '/auth/grants');
    const readable = /^\d{1,2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4}, \d{2}:\d{2} UTC$/;
    const times = async () => Promise.all((await p.locator('main time').all()).map(async (e) => ({ text: (await e.textContent()) ?? '', iso: (await e.getAttribute('datetime')) ?? '' })));
    for (const page of ['/auth/grants', '/auth/sessions', '/auth/security']) {
      await p.goto(`${t.url}${page}`);
      const shown = await times();
      expect([page, shown.length > 0]).toEqual([page, true]);
      for (const { text, iso } of shown) {
        expect(text).toMatch(readable);
        expect(new Date(iso).toISOString()).toBe(iso);
        expect(await p.textContent('main')).not.toContain(iso);
      }
    }
    expect(await p.getByRole('status').count()).toBe(0);

    await p.goto(`${t.url}/auth/grants`);
    await p.getByRole('button', { name: 'Revoke access' }).first().click();
    await p.waitForURL(`${t.url}/auth/grants?done=revoked`);
    expect(await p.getByRole('status').textContent()).toBe('Access revoked: that app can no longer use your account.');
    // Only the fixed messages: any other code shows nothing.
    await p.goto(`${t.url}/auth/grants?done=${encodeURIComponent('<b>Pay here</b>')}`);
    expect(await p.getByRole('status').count()).toBe(0);

    await p.goto(`${t.url}/auth/sessions`);
    await p.getByRole('button', { name: 'Sign out everywhere' }).click();
    await p.waitForURL(/\/auth\/sign-in\?/);
    expect(await p.getByRole('status').textContent()).toMatch(/^You are signed out everywhere/);
    await context.close();
  });

  it('tells the user in plain words what went wrong when an app sends a broken request, keeping the detail', async () => {
    const { context, p } = await freshBrowser();
    await p.goto(`${t.url}/auth/oauth2/authorize?response_type=code`);
    expect(await p.title()).toBe('Error: Something went wrong');
    const text = await p.textContent('main');
    expect(text).toContain('The app that sent you here made a mistake in its request');
    expect(text).toContain("missing required parameter 'client_id' (invalid_request)");
    await context.close();
  });
});

describe('OAuth pages over plain HTTP: tenants, device answers, sessions, paths', () => {
  let t: TestApp;
  let tenantA: { key: string; tenantId: string };
  let tenantB: { key: string; tenantId: string };
  /** Tenant A's web app and device app, both with an extension grant. */
  let notes: oidc.Configuration;
  let tv: oidc.Configuration;
  const password = 'a long plain password';

  type Agent = ReturnType<typeof request.agent>;
  const browse = (agent: Agent, path: string) => browseOn(agent, t.url, path);
  const discover = (clientId: string) => oidc.discovery(new URL(t.url), clientId, undefined, oidc.None(), { execute: [oidc.allowInsecureRequests] });
  const pathOf = (url: string) => new URL(url, t.url).pathname + new URL(url, t.url).search;

  beforeAll(async () => {
    t = await startApp({ OAUTH_DEVICE_POLL_INTERVAL: '1' });
    const root = (await bootstrapAdmin(t)).key;
    tenantA = await createTenant(t, root, 'Workspace A');
    tenantB = await createTenant(t, root, 'Workspace B');
    await t.http.post('/users').set(bearer(tenantA.key)).send({ email: 'ann@a.example', password, name: 'Ann' }).expect(201);
    await t.http.post('/users').set(bearer(tenantB.key)).send({ email: 'bob@b.example', password, name: 'Bob' }).expect(201);
    const web = await t.http
      .post('/auth/clients')
      .set(bearer(tenantA.key))
      .send({ client_name: 'A notes', redirect_uris: [REDIRECT], scope: 'openid core.note:read core.note:write', token_endpoint_auth_method: 'none', extension_permissions: { 'acme.*': 'write' } })
      .expect(201);
    const device = await t.http
      .post('/auth/clients')
      .set(bearer(tenantA.key))
      .send({ client_name: 'A display', grant_types: ['urn:ietf:params:oauth:grant-type:device_code'], scope: 'openid core.note:read edge.acme.links:read', token_endpoint_auth_method: 'none', extension_permissions: { 'acme.notes': 'read' } })
      .expect(201);
    [notes, tv] = [await discover(web.body.client_id), await discover(device.body.client_id)];
  });
  afterAll(async () => t?.close());

  /** Starts an authorization of `app` in `agent`: the first page that is not a redirect, as the response. */
  const startAuthorization = async (agent: Agent, app: oidc.Configuration, state: string) => {
    const verifier = oidc.randomPKCECodeVerifier();
    const url = oidc.buildAuthorizationUrl(app, { redirect_uri: REDIRECT, scope: 'openid core.note:read', code_challenge: await oidc.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', state });
    let res = await agent.get(url.pathname + url.search);
    while (res.status === 303 && new URL(res.headers.location, t.url).origin === t.url) res = await agent.get(pathOf(res.headers.location));
    return { res, verifier };
  };
  const signIn = (agent: Agent, page: string, email: string) =>
    agent.post('/auth/sign-in').type('form').send({ uid: field(page, 'uid'), csrf: field(page, 'csrf'), email, password });
  /** The refusal page's link back to the app: where it leaves for, with the app's error. */
  const backToApp = async (agent: Agent, page: string) => {
    const link = /<a href="([^"]+)">Go back to the application<\/a>/.exec(page)![1].replace(/&amp;/g, '&');
    return new URL((await browse(agent, pathOf(link))).leftTo!);
  };
  /** Opens the device page for `device` in a fresh browser and posts `form` on it. */
  const answerDevice = async (device: oidc.DeviceAuthorizationResponse, form: Record<string, string>) => {
    const agent = request.agent(t.url);
    const page = await agent.get(pathOf(device.verification_uri_complete!)).expect(200);
    const res = await agent.post('/auth/device/consent').type('form').send({ user_code: field(page.text, 'user_code'), csrf: field(page.text, 'csrf'), ...form });
    return { page: page.text, res };
  };
  const poll = (device: oidc.DeviceAuthorizationResponse) =>
    t.http.post('/auth/device/token').type('form').send({ grant_type: 'urn:ietf:params:oauth:grant-type:device_code', device_code: device.device_code, client_id: tv.clientMetadata().client_id });

  it('refuses a tenant\'s client to another tenant\'s user at sign-in, with a page, and the app gets access_denied', async () => {
    const agent = request.agent(t.url);
    const { res: form } = await startAuthorization(agent, notes, 'other-tenant');
    expect(form.status).toBe(200);
    const refused = await signIn(agent, form.text, 'bob@b.example');
    expect(refused.status).toBe(403);
    expect(refused.text).toContain('<strong>A notes</strong> belongs to another workspace');
    const back = await backToApp(agent, refused.text);
    expect([back.origin + back.pathname, back.searchParams.get('error'), back.searchParams.get('state')]).toEqual([REDIRECT, 'access_denied', 'other-tenant']);
    expect(await t.sql(`SELECT 1 FROM oidc_models WHERE model = 'Grant'`)).toEqual([]);

    // The tenant's own user connects as before.
    const own = request.agent(t.url);
    const { res: ownForm, verifier } = await startAuthorization(own, notes, 'own-tenant');
    const signedIn = await signIn(own, ownForm.text, 'ann@a.example').expect(303);
    const consent = await browse(own, pathOf(signedIn.headers.location));
    const decision = await own.post('/auth/authorize/decision').type('form').send({ uid: field(consent.page!, 'uid'), csrf: field(consent.page!, 'csrf'), decision: 'approve' }).expect(303);
    const leftTo = (await browse(own, pathOf(decision.headers.location))).leftTo!;
    const tokens = await oidc.authorizationCodeGrant(notes, new URL(leftTo), { pkceCodeVerifier: verifier, expectedState: 'own-tenant' });
    const note = await t.http.post('/items').set(bearer(tenantA.key)).send({ type: 'core.note', properties: { title: 'A' } }).expect(201);
    await t.http.get(`/items/${note.body.id}`).set(bearer(tokens.access_token)).expect(200);
  });

  it('lets anyone use an openly registered client, and refuses a tenant\'s client at consent to a user signed in for another app', async () => {
    const open = (await t.http.post('/auth/oauth2/register').send({ client_name: 'Open app', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none', scope: 'openid core.note:read' }).expect(201)).body;
    const agent = request.agent(t.url);
    const { res: form, verifier } = await startAuthorization(agent, await discover(open.client_id), 'open');
    const signedIn = await signIn(agent, form.text, 'bob@b.example').expect(303);
    const consent = await browse(agent, pathOf(signedIn.headers.location));
    const decision = await agent.post('/auth/authorize/decision').type('form').send({ uid: field(consent.page!, 'uid'), csrf: field(consent.page!, 'csrf'), decision: 'approve' }).expect(303);
    const leftTo = (await browse(agent, pathOf(decision.headers.location))).leftTo!;
    const tokens = await oidc.authorizationCodeGrant(await discover(open.client_id), new URL(leftTo), { pkceCodeVerifier: verifier, expectedState: 'open' });
    const note = await t.http.post('/items').set(bearer(tenantB.key)).send({ type: 'core.note', properties: { title: 'B' } }).expect(201);
    await t.http.get(`/items/${note.body.id}`).set(bearer(tokens.access_token)).expect(200);

    // Signed in already, Bob goes straight to the consent of tenant A's app: refused there.
    const { res: refused } = await startAuthorization(agent, notes, 'at-consent');
    expect(refused.status).toBe(403);
    expect(refused.text).toContain('belongs to another workspace');
    const back = await backToApp(agent, refused.text);
    expect([back.searchParams.get('error'), back.searchParams.get('state')]).toEqual(['access_denied', 'at-consent']);
  });

  it('gives no token of a tenant\'s client to another tenant\'s user, even of a grant made before the rule', async () => {
    const open = (await t.http.post('/auth/oauth2/register').send({ client_name: 'Later A app', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none', scope: 'openid core.note:read' }).expect(201)).body;
    const app = await discover(open.client_id);
    const agent = request.agent(t.url);
    const { res: form, verifier } = await startAuthorization(agent, app, 'before');
    const signedIn = await signIn(agent, form.text, 'bob@b.example').expect(303);
    const consent = await browse(agent, pathOf(signedIn.headers.location));
    const decision = await agent.post('/auth/authorize/decision').type('form').send({ uid: field(consent.page!, 'uid'), csrf: field(consent.page!, 'csrf'), decision: 'approve' }).expect(303);
    const tokens = await oidc.authorizationCodeGrant(app, new URL((await browse(agent, pathOf(decision.headers.location))).leftTo!), { pkceCodeVerifier: verifier, expectedState: 'before' });
    // The client becomes tenant A's, with an extension grant, as if Bob's consent had been given to such a client.
    await t.sql(`UPDATE oidc_models SET payload = payload || $2::jsonb WHERE model = 'Client' AND id = $1`, [open.client_id, JSON.stringify({ tenant_id: tenantA.tenantId, extension_permissions: { '*': 'write' } })]);
    const refreshed = await oidc.refreshTokenGrant(app, tokens.refresh_token!);
    expectError(await t.http.get('/items').set(bearer(refreshed.access_token)), 401, 'unauthorized');
  });

  it('refuses a tenant\'s device app to another tenant\'s user, and the device gets access_denied', async () => {
    const device = await oidc.initiateDeviceAuthorization(tv, { scope: 'openid core.note:read' });
    const { res } = await answerDevice(device, { email: 'bob@b.example', password, decision: 'approve' });
    expect(res.status).toBe(403);
    expect(res.text).toContain('<strong>A display</strong> belongs to another workspace');
    expect((await poll(device)).body.error).toBe('access_denied');
    expect(await t.sql(`SELECT 1 FROM oidc_models WHERE model = 'Grant' AND payload->>'clientId' = $1`, [tv.clientMetadata().client_id])).toEqual([]);
  });

  it('lists the app\'s extension grant on the device page, as on the code flow\'s consent page', async () => {
    const device = await oidc.initiateDeviceAuthorization(tv, { scope: 'openid core.note:read edge.acme.links:read' });
    const { page } = await answerDevice(device, {});
    for (const literal of ['core.note:read', 'items of type core.note', 'edge.acme.links:read', 'edges of type acme.links', 'extension namespaces: <code>acme.notes</code> (read)']) {
      expect(page).toContain(literal);
    }
  });

  it('takes a device decision either way only with the user\'s email and password', async () => {
    const device = await oidc.initiateDeviceAuthorization(tv, { scope: 'openid' });
    const anonymous = await answerDevice(device, { decision: 'deny' });
    expect(anonymous.res.status).toBe(401);
    expect(anonymous.res.text).toContain('The email or the password is not right.');
    expect((await answerDevice(device, { email: 'ann@a.example', password: 'not the password', decision: 'deny' })).res.status).toBe(401);
    expect((await poll(device)).body.error).toBe('authorization_pending');
    const denied = await answerDevice(device, { email: 'ann@a.example', password, decision: 'deny' });
    expect([denied.res.status, /<h1>([^<]*)<\/h1>/.exec(denied.res.text)?.[1]]).toEqual([200, 'Not connected']);
    await pollIntervalPassed(t, device.device_code);
    expect((await poll(device)).body.error).toBe('access_denied');
  });

  it('refuses a sign-in, consent or device field given twice with a 400 page in the API\'s words ("give uid once"), acting on neither', async () => {
    const refusedTwice = (res: request.Response, name: string) => {
      expect([res.status, res.headers['content-type']]).toEqual([400, 'text/html; charset=utf-8']);
      expect(res.text).toContain(`give ${name} once`);
    };
    const form = (fields: Array<[string, string]>) => new URLSearchParams(fields).toString();

    // The device page: a link with two codes (the first one good), and a form with two of a field.
    const device = await oidc.initiateDeviceAuthorization(tv, { scope: 'openid' });
    const agent = request.agent(t.url);
    refusedTwice(await agent.get(`/auth/device?user_code=${device.user_code}&user_code=BCD-FGHJ`), 'user_code');
    const page = (await agent.get(pathOf(device.verification_uri_complete!)).expect(200)).text;
    const answer: Array<[string, string]> = [['user_code', field(page, 'user_code')], ['csrf', field(page, 'csrf')], ['email', 'ann@a.example'], ['password', password]];
    refusedTwice(await agent.post('/auth/device/consent').type('form').send(form([...answer, ['decision', 'approve'], ['decision', 'deny']])), 'decision');
    refusedTwice(await agent.post('/auth/device/consent').type('form').send(form([...answer, ['user_code', device.user_code], ['decision', 'approve']])), 'user_code');
    expect((await poll(device)).body.error).toBe('authorization_pending');

    // The sign-in and consent pages: the interaction named twice, even as the same uid, in a link or a form.
    const fresh = await t.http.post('/auth/clients').set(bearer(tenantA.key)).send({ client_name: 'Twice', redirect_uris: [REDIRECT], scope: 'openid core.note:read', token_endpoint_auth_method: 'none' }).expect(201);
    const app = await discover(fresh.body.client_id);
    const browser = request.agent(t.url);
    const { res: signInForm } = await startAuthorization(browser, app, 'twice');
    const uid = field(signInForm.text, 'uid');
    refusedTwice(await browser.get(`/auth/sign-in?uid=${uid}&uid=${uid}`), 'uid');
    refusedTwice(await browser.get(`/auth?interaction=${uid}&interaction=${uid}`), 'interaction');
    const signInFields: Array<[string, string]> = [['uid', uid], ['csrf', field(signInForm.text, 'csrf')], ['email', 'ann@a.example'], ['password', password]];
    refusedTwice(await browser.post('/auth/sign-in').type('form').send(form([...signInFields, ['uid', uid]])), 'uid');
    const signedIn = await browser.post('/auth/sign-in').type('form').send(form(signInFields)).expect(303);
    const consent = await browse(browser, pathOf(signedIn.headers.location));
    const atConsent = field(consent.page!, 'uid');
    refusedTwice(await browser.get(`/auth/consent?uid=${atConsent}&uid=${atConsent}`), 'uid');
    const decision: Array<[string, string]> = [['uid', atConsent], ['csrf', field(consent.page!, 'csrf')]];
    refusedTwice(await browser.post('/auth/authorize/decision').type('form').send(form([...decision, ['decision', 'approve'], ['decision', 'deny']])), 'decision');
    expect(await t.sql(`SELECT 1 FROM oidc_models WHERE model = 'Grant' AND payload->>'clientId' = $1`, [fresh.body.client_id])).toEqual([]);
    // Still open: the decision given once is taken.
    await browser.post('/auth/authorize/decision').type('form').send(form([...decision, ['decision', 'approve']])).expect(303);
  });

  it('lists sign-in sessions without the session cookies\' values', async () => {
    const agent = request.agent(t.url);
    const { res: form } = await startAuthorization(agent, notes, 'session');
    // Signing in for an app opens a provider session (on the way on to its consent page).
    const signedIn = await signIn(agent, form.text, 'ann@a.example').expect(303);
    await browse(agent, pathOf(signedIn.headers.location));
    const account = await agent.get('/auth/sign-in?return_to=/auth/sessions').expect(200);
    await agent.post('/auth/sign-in').type('form').send({ return_to: '/auth/sessions', csrf: field(account.text, 'csrf'), email: 'ann@a.example', password }).expect(303);
    const listed = async () => (await agent.get('/auth/sessions').set('Accept', 'application/json').expect(200)).body.sessions as Array<{ id: string }>;
    const sessions = await listed();
    expect(sessions.length).toBeGreaterThanOrEqual(1);
    // A provider session's id is its browser's `_session` cookie.
    const ann = `SELECT id::text FROM users WHERE email = 'ann@a.example'`;
    const cookies = (await t.sql<{ id: string }>(`SELECT id FROM oidc_models WHERE model = 'Session' AND payload->>'accountId' = (${ann})`)).map((r) => r.id);
    expect(cookies.length).toBeGreaterThanOrEqual(1);
    for (const { id } of sessions) {
      expect(cookies).not.toContain(id);
      for (const cookie of cookies) expect(id).not.toContain(cookie);
    }
    expect(await listed()).toEqual(sessions);
    const page = await agent.get('/auth/sessions').expect(200);
    await agent.post('/auth/sessions/revoke').type('form').send({ csrf: field(page.text, 'csrf') }).expect(303);
    expect(await t.sql(`SELECT 1 FROM oidc_models WHERE model = 'Session' AND id = ANY($1)`, [cookies])).toEqual([]);
  });

  it('serves the provider\'s sub-paths in any letter case, the ids in them as sent', async () => {
    const open = (await t.http.post('/auth/oauth2/register').send({ redirect_uris: [REDIRECT] }).expect(201)).body;
    const { pathname } = new URL(open.registration_client_uri);
    expect(pathname).toBe(`/auth/oauth2/register/${open.client_id}`);
    for (const path of [pathname, `/Auth/OAuth2/Register/${open.client_id}`, `/AUTH/OAUTH2/REGISTER/${open.client_id}`]) {
      const res = await t.http.get(path).set(bearer(open.registration_access_token));
      expect([path, res.status, res.body.client_id]).toEqual([path, 200, open.client_id]);
    }
    expect((await t.http.get(`/Auth/Logout/Success`)).status).toBe(200);
  });
});
