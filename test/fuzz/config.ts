/**
 * The fuzzer's budget and seed, from the environment. Two profiles: the short one that runs
 * inside `npm test` (sized for about a minute on the 2-core CI machine, service start-up
 * included) and the long one behind `npm run fuzz` (FUZZ_PROFILE=long). Each value can be
 * overridden on its own, e.g. `FUZZ_SEED=7 FUZZ_RUNS=20000 npm run fuzz`.
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface FuzzConfig {
  profile: 'short' | 'long';
  /** fast-check seed: fixed by default so that CI runs are reproducible. */
  seed: number;
  /** Generated requests in the survey (one request per fast-check run). */
  runs: number;
  /** Wall-clock cap on the survey; the run stops early (as a pass) when it is reached. */
  seconds: number;
  /** Wall-clock budget for shrinking the failures found, all classes together. */
  shrinkSeconds: number;
  /** At most this many failure classes are shrunk (the rest are reported unshrunk). */
  shrinkClasses: number;
  /** Replay a single case (`FUZZ_PATH` from a report) instead of surveying. */
  path?: string;
  /** Per-request timeout. */
  requestTimeoutMs: number;
  /** Where large request bodies of replays and the full report are written. */
  outDir: string;
}

function int(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  // Strict on purpose: a typo in a budget must not silently become 0 or NaN.
  if (!/^\d+$/.test(raw)) throw new Error(`${name} must be a non-negative decimal integer, got ${JSON.stringify(raw)}`);
  return Number(raw);
}

export function loadFuzzConfig(): FuzzConfig {
  const profile = process.env.FUZZ_PROFILE === 'long' ? 'long' : 'short';
  const long = profile === 'long';
  return {
    profile,
    seed: int('FUZZ_SEED', 424242),
    runs: int('FUZZ_RUNS', long ? 20_000 : 2500),
    seconds: int('FUZZ_SECONDS', long ? 600 : 30),
    shrinkSeconds: int('FUZZ_SHRINK_SECONDS', long ? 180 : 12),
    shrinkClasses: int('FUZZ_SHRINK_CLASSES', long ? 40 : 6),
    path: process.env.FUZZ_PATH || undefined,
    requestTimeoutMs: int('FUZZ_REQUEST_TIMEOUT_MS', 15000),
    outDir: process.env.FUZZ_OUT_DIR || join(tmpdir(), 'svc-fuzz'),
  };
}
