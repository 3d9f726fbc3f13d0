/**
 * Routes that take no body (README, "Input rules"): a body sent anyway is absent or `{}`, else
 * refused as unknown fields are on every API route (400 validation_error naming them), JSON that
 * is not an object as such, and a media type other than JSON 415. Checked after the credential
 * and the route's permission, and before the handler does anything.
 */
import { bearer, bootstrapAdmin, createKey, startApp, TestApp } from './support/app';
import { badFields, expectError } from './support/envelope';

describe('routes without a body (e2e)', () => {
  let t: TestApp;
  let admin: string;
  let member: string;
  const NO_SUCH = '00000000-0000-4000-8000-000000000001';

  beforeAll(async () => {
    t = await startApp();
    admin = (await bootstrapAdmin(t)).key;
    member = (await createKey(t, admin, { label: 'member', role: 'member', type_permissions: { '*': 'write' } })).key;
  });
  afterAll(async () => {
    await t?.close();
  });

  const newItem = async (): Promise<string> =>
    (await t.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title: 'bodyless' } }).expect(201)).body.id;
  const status = async (id: string): Promise<string> => (await t.http.get(`/items/${id}`).set(bearer(admin)).expect(200)).body.state;
  const json = (req: ReturnType<TestApp['http']['delete']>, text: string) => req.set(bearer(admin)).type('json').send(text);

  it('DELETE refuses a body with fields, naming each as an unknown field, and does nothing', async () => {
    const id = await newItem();
    const res = await json(t.http.delete(`/items/${id}`), '{"x":1,"reason":"gone"}');
    expect(badFields(res)).toEqual(['x', 'reason']);
    expect(res.body.error.details.fields).toEqual([
      { field: 'x', message: 'is not a known field' },
      { field: 'reason', message: 'is not a known field' },
    ]);
    expect(await status(id)).toBe('active');
  });

  it('DELETE refuses a JSON array as a body that is not an object', async () => {
    const id = await newItem();
    const res = await json(t.http.delete(`/items/${id}`), '[1,2]');
    expect(expectError(res, 400, 'validation_error').details).toEqual({ fields: [{ field: '(body)', message: 'must be a JSON object' }] });
    expect(badFields(await json(t.http.delete(`/items/${id}`), '[]'))).toEqual(['(body)']);
    expect(await status(id)).toBe('active');
  });

  it('DELETE takes no body, an empty JSON body, or {}', async () => {
    const [a, b, c] = [await newItem(), await newItem(), await newItem()];
    await t.http.delete(`/items/${a}`).set(bearer(admin)).expect(200);
    await json(t.http.delete(`/items/${b}`), '{}').expect(200);
    await t.http.delete(`/items/${c}`).set(bearer(admin)).set('Content-Type', 'application/json').expect(200);
    for (const id of [a, b, c]) expect(await status(id)).toBe('trashed');
  });

  it('DELETE /items/bulk_action/jobs/{id}: a body with fields is refused before the job is looked up', async () => {
    expect(badFields(await json(t.http.delete(`/items/bulk_action/jobs/${NO_SUCH}`), '{"x":1}'))).toEqual(['x']);
    expect(badFields(await json(t.http.delete(`/items/bulk_action/jobs/${NO_SUCH}`), '[1,2]'))).toEqual(['(body)']);
    expectError(await json(t.http.delete(`/items/bulk_action/jobs/${NO_SUCH}`), '{}'), 404, 'bulk_job_not_found');
    expectError(await t.http.delete(`/items/bulk_action/jobs/${NO_SUCH}`).set(bearer(admin)), 404, 'bulk_job_not_found');
  });

  it('DELETE with a body that is not JSON is 415, as a POST with one is', async () => {
    const id = await newItem();
    const text = expectError(await t.http.delete(`/items/${id}`).set(bearer(admin)).type('text').send('x'), 415, 'invalid_request');
    expect(text.details).toEqual({ content_type: 'text/plain' });
    expectError(await t.http.delete(`/items/${id}`).set(bearer(admin)).type('form').send('x=1'), 415, 'invalid_request');
    expect(await status(id)).toBe('active');
  });

  it('a body-less POST (webhook delivery retry) refuses fields and arrays, and takes {} or nothing', async () => {
    const retry = `/webhooks/${NO_SUCH}/deliveries/${NO_SUCH}/retry`;
    expect(badFields(await json(t.http.post(retry), '{"x":1}'))).toEqual(['x']);
    expect(badFields(await json(t.http.post(retry), '[1,2]'))).toEqual(['(body)']);
    expectError(await json(t.http.post(retry), '{}'), 404, 'webhook_not_found');
    expectError(await t.http.post(retry).set(bearer(admin)), 404, 'webhook_not_found');
  });

  it('a body-less POST that rotates a secret refuses fields before rotating anything', async () => {
    const client = (
      await t.http.post('/auth/clients').set(bearer(admin)).send({ client_name: 'bodyless', grant_types: ['client_credentials'], scope: 'core.note:read' }).expect(201)
    ).body;
    expect(client.client_secret).toEqual(expect.any(String));
    const rotate = `/auth/clients/${client.client_id}/secret`;
    expect(badFields(await json(t.http.post(rotate), '{"client_secret":"mine"}'))).toEqual(['client_secret']);
    const rotated = await json(t.http.post(rotate), '{}').expect(200);
    expect(rotated.body.client_secret).not.toEqual(client.client_secret);
  });

  it('answers 401 and 403 before looking at the body', async () => {
    const id = await newItem();
    expectError(await t.http.delete(`/items/${id}`).type('json').send('{"x":1}'), 401, 'unauthorized');
    expectError(await t.http.delete(`/keys/${NO_SUCH}`).set(bearer(member)).type('json').send('{"x":1}'), 403, 'forbidden');
    expect(await status(id)).toBe('active');
  });

  it('leaves GET bodies dropped, and routes that declare a body to their own validation', async () => {
    const id = await newItem();
    await t.http.get(`/items/${id}`).set(bearer(admin)).type('json').send('{"x":1}').expect(200);
    const bad = await t.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title: 'x' }, x: 1 });
    expect(badFields(bad)).toEqual(['x']);
  });
});
