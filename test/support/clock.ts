/**
 * Making this process's clock disagree with the database's, the one clock the service judges
 * instants by (key expiry, a user's `disabled_until`): on one machine the two otherwise agree.
 */

/** `run` while this process's `Date.now` is `skewMs` off the real clock (the database's). */
export async function withClockSkew<T>(skewMs: number, run: () => Promise<T>): Promise<T> {
  const realNow = Date.now.bind(Date);
  const clock = jest.spyOn(Date, 'now').mockImplementation(() => realNow() + skewMs);
  try {
    return await run();
  } finally {
    clock.mockRestore();
  }
}
