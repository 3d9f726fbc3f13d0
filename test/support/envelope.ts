import type { Response } from 'supertest';

/** Asserts a response is the SPEC 2.9 error envelope with this status and code; returns the error. */
export function expectError(res: Response, status: number, code: string): { code: string; message: string; details?: Record<string, any> } {
  if (res.status !== status || res.body?.error?.code !== code) {
    throw new Error(`expected ${status} ${code}, got ${res.status} ${res.text?.slice(0, 500)}`);
  }
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  expect(Object.keys(res.body)).toEqual(['error']);
  const error = res.body.error;
  expect(typeof error.message).toBe('string');
  expect(error.message.length).toBeGreaterThan(0);
  for (const k of Object.keys(error)) expect(['code', 'message', 'details']).toContain(k);
  if ('details' in error) expect(typeof error.details).toBe('object');
  return error;
}

/** The field names listed by a 400 validation_error. */
export function badFields(res: Response): string[] {
  const error = expectError(res, 400, 'validation_error');
  expect(Array.isArray(error.details?.fields)).toBe(true);
  return (error.details!.fields as Array<{ field: string; message: string }>).map((f) => {
    expect(typeof f.message).toBe('string');
    return f.field;
  });
}
