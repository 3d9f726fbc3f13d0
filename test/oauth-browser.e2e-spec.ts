/**
 * The provider's pages in a real browser (Debian's Chromium through playwright-core): sign-in
 * and partial consent in the code flow, and the device page, each saved as a screenshot under
 * test-artifacts/screenshots (git-ignored). The tokens are then taken with openid-client, as
 * the app would.
 */
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import * as oidc from 'openid-client';
import { Browser, chromium, Page } from 'playwright-core';
import { bearer, bootstrapAdmin, startApp, TestApp } from './support/app';
import { expectError } from './support/envelope';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const SHOTS = path.join(__dirname, '..', 'test-artifacts', 'screenshots');
const REDIRECT = 'https://notes.example.com/callback';

jest.setTimeout(60_000);

describe('OAuth pages in Chromium', () => {
  let t: TestApp;
  let browser: Browser;
  let page: Page;
  let rp: oidc.Configuration;
  let tv: oidc.Configuration;

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`Chromium not found at ${CHROMIUM}: apt-get install chromium (or set CHROMIUM_PATH)`);
    mkdirSync(SHOTS, { recursive: true });
    t = await startApp({ OAUTH_DEVICE_POLL_INTERVAL: '1' });
    const admin = (await bootstrapAdmin(t)).key;
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
    expect(tokens.scope ?? '').toBe('');
    expect(tokens.id_token).toBeUndefined();
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
    await p.getByLabel('Email').fill('grace@example.com');
    await p.getByLabel('Password').fill('a long browser password');
    await p.getByRole('button', { name: 'Sign in' }).click();
    const allow = p.getByRole('button', { name: 'Allow' });
    const back = p.getByText('back in the app');
    await Promise.race([back.waitFor(), allow.waitFor().then(() => allow.click())]);
    await back.waitFor();

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
});
