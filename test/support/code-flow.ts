/**
 * A user connects an authorization-code client through the real pages, each time in a fresh
 * browser: the sign-in on the provider's page (which starts a provider session once the
 * authorization resumes), the consent, and the tokens the app gets for the code.
 */
import { createHash, randomBytes } from 'node:crypto';
import request from 'supertest';
import type { TestApp } from './app';
import { browse, field } from './browse';

/** A confidential client registered with `redirect_uri` and `scope`, as POST /auth/clients answered it, with them. */
export interface CodeClient {
  client_id: string;
  client_secret: string;
  redirect_uri: string;
  scope: string;
}

/** A fresh browser starts the app's authorization and signs in on the provider's page as `email`: the sign-in's answer (303: signed in). */
export async function providerSignIn(t: TestApp, client: CodeClient, email: string, password: string) {
  const agent = request.agent(t.url);
  const verifier = randomBytes(32).toString('base64url');
  const query = new URLSearchParams({
    client_id: client.client_id,
    redirect_uri: client.redirect_uri,
    response_type: 'code',
    scope: client.scope,
    state: 'st',
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
  });
  const page = await browse(agent, t.url, `/auth/authorize?${query}`);
  const res = await agent.post('/auth/sign-in').type('form').send({ uid: field(page.page!, 'uid'), csrf: field(page.page!, 'csrf'), email, password });
  return { res, agent, verifier };
}

/** `email` signs in on the provider's page and approves the app: the tokens the app gets for the code. */
export async function connect(t: TestApp, client: CodeClient, email: string, password: string): Promise<{ access_token: string; refresh_token: string }> {
  const { res, agent, verifier } = await providerSignIn(t, client, email, password);
  expect(res.status).toBe(303);
  const consent = await browse(agent, t.url, new URL(res.headers.location, t.url).pathname);
  const decision = await agent.post('/auth/authorize/decision').type('form').send({ uid: field(consent.page!, 'uid'), csrf: field(consent.page!, 'csrf'), decision: 'approve' });
  const back = await browse(agent, t.url, new URL(decision.headers.location, t.url).pathname);
  const code = new URL(back.leftTo!).searchParams.get('code')!;
  const tokens = await t.http
    .post('/auth/token')
    .auth(client.client_id, client.client_secret)
    .type('form')
    .send({ grant_type: 'authorization_code', code, redirect_uri: client.redirect_uri, code_verifier: verifier });
  expect(tokens.status).toBe(200);
  return tokens.body;
}
