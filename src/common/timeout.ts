/** Waits for `work` at most `ms`; a rejection or the deadline both give undefined. */
export async function withinTimeout<T>(work: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms)));
  try {
    return await Promise.race([work, deadline]);
  } catch {
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}
