/**
 * Failed sign-ins per account, for every form that checks a password (the sign-in pages and the
 * device page, through UsersService.authenticate): the per-address rate limit alone lets an
 * attacker with many addresses guess one account's password without end.
 *
 * A Redis counter per email (normalised as sign-in matches it: trimmed, any letter case; hashed,
 * so Redis holds no addresses and a key's length does not follow the input), shared by every
 * instance, counts attempts in a window that starts with the first: once MAX_FAILURES attempts
 * failed within WINDOW_MS, the rest of the window is refused without checking the password, and
 * a success clears the counter. An attempt is counted before its password is checked, so guesses
 * sent at once cannot all be checked before any is counted. Emails that belong to no account are
 * counted the same way: the answer must not tell which addresses have one. Should Redis not
 * answer, the password is checked anyway (the per-address limit still holds), rather than no one
 * signing in.
 */
import type Redis from 'ioredis';
import { createHash } from 'node:crypto';
import { withinTimeout } from '../common/timeout';

export const MAX_FAILURES = 10;
export const WINDOW_MS = 15 * 60_000;
const REDIS_WAIT_MS = 500;

const COUNT = `
local n = redis.call('INCR', KEYS[1])
if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return {n, redis.call('PTTL', KEYS[1])}
`;

export class SignInThrottle {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  private key(email: string): string {
    const digest = createHash('sha256').update(email.trim().toLowerCase()).digest('base64url');
    return `${this.prefix}sign-in:failures:${digest}`;
  }

  /** Counts an attempt for `email`: undefined when it may go ahead, else the minutes until it may. */
  async attempt(email: string): Promise<number | undefined> {
    if (this.redis.status !== 'ready') return undefined;
    const counted = await withinTimeout(this.redis.eval(COUNT, 1, this.key(email), WINDOW_MS) as Promise<[number, number]>, REDIS_WAIT_MS);
    if (!counted || counted[0] <= MAX_FAILURES) return undefined;
    return Math.max(1, Math.ceil(counted[1] / 60_000));
  }

  /** A right password: the account's failures are forgotten. */
  async succeeded(email: string): Promise<void> {
    await withinTimeout(this.redis.del(this.key(email)), REDIS_WAIT_MS);
  }
}
