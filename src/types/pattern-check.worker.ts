/** The worker of pattern-check.ts: checks properties against a schema, as the main thread would. */
import { parentPort } from 'node:worker_threads';
import { ApiError } from '../common/api-error';
import type { CheckAnswer, CheckRequest } from './pattern-check';
import { onCompile } from './compiled-validators';
import { checkProperties } from './property-validation';

parentPort!.on('message', (request: CheckRequest) => {
  onCompile((phase) => parentPort!.postMessage({ id: request.id, compiling: phase === 'start' } satisfies CheckAnswer));
  let answer: CheckAnswer;
  try {
    answer = { id: request.id, errors: checkProperties(request.cacheKey, request.schema, request.properties) };
  } catch (err) {
    answer =
      err instanceof ApiError
        ? { id: request.id, apiError: { status: err.status, code: err.code, message: err.message, details: err.details } }
        : { id: request.id, failure: (err as Error).message };
  }
  parentPort!.postMessage(answer);
});
parentPort!.postMessage({ ready: true } satisfies CheckAnswer);
