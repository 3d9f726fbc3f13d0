/** Runs at most `limit` tasks per key at once in this process; the rest wait their turn, in order. */
export class KeyedLimiter {
  private readonly lanes = new Map<string, { running: number; waiting: Array<() => void> }>();

  constructor(private readonly limit: number) {}

  waiting(key: string): number {
    return this.lanes.get(key)?.waiting.length ?? 0;
  }

  /** Tasks of `key` running or waiting. */
  load(key: string): number {
    const lane = this.lanes.get(key);
    return lane ? lane.running + lane.waiting.length : 0;
  }

  /**
   * Runs `task` once `key` has a free place. With `maxWaitMs`, a task still waiting after that
   * long leaves the line and `onTimeout()` is thrown instead; it never ran.
   */
  async run<T>(key: string, task: () => Promise<T>, maxWaitMs?: number, onTimeout?: () => Error): Promise<T> {
    let lane = this.lanes.get(key);
    if (!lane) this.lanes.set(key, (lane = { running: 0, waiting: [] }));
    if (lane.running >= this.limit) await this.turn(key, lane, maxWaitMs, onTimeout);
    lane.running++;
    try {
      return await task();
    } finally {
      lane.running--;
      const next = lane.waiting.shift();
      if (next) next();
      else if (lane.running === 0) this.lanes.delete(key);
    }
  }

  private turn(key: string, lane: { running: number; waiting: Array<() => void> }, maxWaitMs?: number, onTimeout?: () => Error): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (maxWaitMs === undefined) {
        lane.waiting.push(resolve);
        return;
      }
      const go = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        lane.waiting.splice(lane.waiting.indexOf(go), 1);
        if (lane.running === 0 && lane.waiting.length === 0) this.lanes.delete(key);
        reject(onTimeout ? onTimeout() : new Error(`waited over ${maxWaitMs} ms`));
      }, maxWaitMs);
      lane.waiting.push(go);
    });
  }
}
