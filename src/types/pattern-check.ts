/**
 * Checks item properties against a schema with patterns off the event loop, in a worker thread
 * that is stopped if a check runs past CHECK_TIMEOUT_MS. RE2 matches in time linear in the
 * input, but with a factor as large as the pattern's compiled program once its DFA outgrows its
 * cache: `(.{1,1000})x`, within the schema limits, took 2.7 s over 50,000 ASCII characters and
 * 160 s over as many "é" (re2-wasm, measured 2026-11-26), in the process every tenant shares.
 * Wasm code stops when its worker is terminated (3 ms after `terminate()`, measured).
 *
 * One worker: checks run one at a time, each within CHECK_TIMEOUT_MS of being asked for (waiting
 * included), so a flood of slow checks delays others by at most that long before they are refused.
 */
import type { ErrorObject } from 'ajv';
import { Worker } from 'node:worker_threads';
import { ApiError } from '../common/api-error';

export const CHECK_TIMEOUT_MS = 1000;

/** What the worker is asked and answers (pattern-check.worker.ts). */
export interface CheckRequest {
  id: number;
  cacheKey: string;
  schema: Record<string, unknown>;
  properties: unknown;
}
export type CheckAnswer =
  | { id: number; errors: ErrorObject[] }
  | { id: number; apiError: { status: number; code: ApiError['code']; message: string; details?: Record<string, unknown> } }
  | { id: number; failure: string };

interface Pending {
  request: CheckRequest;
  deadline: number;
  resolve: (errors: ErrorObject[]) => void;
  reject: (err: Error) => void;
}

const tooSlow = () =>
  ApiError.badRequest(
    'invalid_schema',
    `The type's schema cannot check these properties: its patterns took more than ${CHECK_TIMEOUT_MS} ms over these values; shorten the values or simplify the patterns`,
  );

class PatternChecker {
  private worker?: Worker;
  private readonly queue: Pending[] = [];
  private running?: Pending & { timer: NodeJS.Timeout };
  private nextId = 1;

  check(cacheKey: string, schema: Record<string, unknown>, properties: unknown): Promise<ErrorObject[]> {
    return new Promise((resolve, reject) => {
      this.queue.push({ request: { id: this.nextId++, cacheKey, schema, properties }, deadline: Date.now() + CHECK_TIMEOUT_MS, resolve, reject });
      this.next();
    });
  }

  private next(): void {
    if (this.running) return;
    let next: Pending | undefined;
    while ((next = this.queue.shift()) && next.deadline <= Date.now()) next.reject(tooSlow());
    if (!next) return;
    const job = next;
    const worker = this.started();
    const timer = setTimeout(() => {
      // Stuck in a match: the worker goes, and the next check gets a fresh one.
      this.stop(worker);
      this.finish(job.request.id, (p) => p.reject(tooSlow()));
    }, job.deadline - Date.now());
    this.running = { ...job, timer };
    try {
      worker.postMessage(job.request);
    } catch (err) {
      this.finish(job.request.id, (p) => p.reject(err as Error)); // properties that cannot be cloned
    }
  }

  private finish(id: number, settle: (p: Pending) => void): void {
    const running = this.running;
    if (!running || running.request.id !== id) return;
    clearTimeout(running.timer);
    this.running = undefined;
    settle(running);
    this.next();
  }

  private started(): Worker {
    if (this.worker) return this.worker;
    // Under ts-jest the sources are TypeScript: the worker compiles its own with ts-node.
    const ts = __filename.endsWith('.ts');
    const worker = new Worker(`${__dirname}/pattern-check.worker.${ts ? 'ts' : 'js'}`, {
      execArgv: ts ? ['--require', 'ts-node/register/transpile-only'] : [],
    });
    worker.on('message', (answer: CheckAnswer) =>
      this.finish(answer.id, (p) => {
        if ('errors' in answer) p.resolve(answer.errors);
        else if ('apiError' in answer) p.reject(new ApiError(answer.apiError.status, answer.apiError.code, answer.apiError.message, answer.apiError.details));
        else p.reject(new Error(answer.failure));
      }),
    );
    worker.on('error', (err) => {
      this.stop(worker);
      if (this.running) this.finish(this.running.request.id, (p) => p.reject(err));
    });
    worker.on('exit', () => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      if (this.running) this.finish(this.running.request.id, (p) => p.reject(new Error('the pattern check worker exited')));
    });
    worker.unref(); // after the listeners, which would ref it again: it must not keep a stopping process alive
    this.worker = worker;
    return worker;
  }

  private stop(worker: Worker): void {
    if (this.worker === worker) this.worker = undefined;
    void worker.terminate();
  }
}

export const patternChecker = new PatternChecker();
