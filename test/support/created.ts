/**
 * Checks shared by the e2e files of each area: a POST that takes an Idempotency-Key replays its
 * first answer to a retry and refuses the key with another request; a 201 names what it made in
 * `Location`, which a GET answers.
 */
import { randomUUID } from 'node:crypto';
import type { Response, Test } from 'supertest';
import type { TestApp } from './app';
import { bearer } from './app';
import { expectError } from './envelope';

/**
 * Sends `post()` twice with one new Idempotency-Key, then `other()` (another body or path) with
 * it: the retry is the first answer again (status, body, Location) with `Idempotent-Replayed:
 * true`, the other 409 `conflict`. Answers the first response; the caller checks that the work
 * was done once.
 */
export async function expectReplayed(post: () => Test, other: () => Test, status: number): Promise<Response> {
  const key = randomUUID();
  const first = await post().set('Idempotency-Key', key);
  expect([first.status, first.headers['idempotent-replayed']]).toEqual([status, undefined]);
  const retry = await post().set('Idempotency-Key', key);
  expect([retry.status, retry.headers['idempotent-replayed'], retry.headers.location]).toEqual([status, 'true', first.headers.location]);
  expect(retry.body).toEqual(first.body);
  expectError(await other().set('Idempotency-Key', key), 409, 'conflict');
  return first;
}

/** `res` is a 201 whose Location is `path`, relative to the service root, and a GET of it with `key` is 200. */
export async function expectLocation(t: TestApp, res: Response, path: string, key: string): Promise<Response> {
  expect([res.status, res.headers.location]).toEqual([201, path]);
  return t.http.get(path).set(bearer(key)).expect(200);
}
