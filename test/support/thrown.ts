import { ApiError } from '../../src/common/api-error';

/**
 * The ApiError `fn` throws, or undefined when it throws nothing. Anything else it throws is
 * rethrown, so a test expecting an ApiError fails loudly on a plain Error.
 */
export function thrownApiError(fn: () => unknown): ApiError | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  return undefined;
}
