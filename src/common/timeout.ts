/** Waits for `work` at most `ms`; a rejection or the deadline both give undefined. */
export function withinTimeout<T>(work: Promise<T>, ms: number): Promise<T | undefined> {
  return orTimeout(work, ms, 'work').catch(() => undefined);
}

/** `work`, or a rejection once `ms` have passed without it settling (the work itself goes on). */
export async function orTimeout<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(Object.assign(new Error(`${what}: no answer within ${ms} ms`), { code: 'ETIMEDOUT' })), ms)));
  try {
    return await Promise.race([work, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
