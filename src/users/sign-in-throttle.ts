/**
 * Failed sign-ins, for every form that checks a password (the sign-in pages and the device page,
 * through UsersService.authenticate). Two counts, in Redis so that every instance shares them,
 * each of the attempts made in the WINDOW_MS before, in rolling windows (rolling-window.ts's): a
 * window starting with the first attempt would let the limit through at its end and again at the
 * start of the next, twice the limit within seconds, when the guesser chose where it starts.
 *
 * - per account and client address (SIGN_IN_MAX_FAILURES_PER_ADDRESS, 10): once it is reached,
 *   that address is refused for that account until the oldest of them is WINDOW_MS old (an IPv6
 *   address with its whole /64, which one client can send from: `addressBucket`,
 *   client-address.ts). A refusal that held for the account from everywhere would let anyone keep
 *   its owner out with a few requests; held for one address, it keeps out only whoever guesses
 *   from there. A success clears it.
 * - per account from every address (SIGN_IN_MAX_FAILURES_PER_ACCOUNT, 100): the bound on
 *   guessing from many addresses, which the count per address (and the per-address rate limit)
 *   cannot give. Once it is reached the account is refused from everywhere until the oldest of
 *   them is WINDOW_MS old: a lock-out still, but one that takes that many guesses, from at least
 *   that many addresses over the limit per address. A success takes back its own attempt and no
 *   other: the owner signing in says nothing of the guesses made elsewhere, and were they
 *   forgotten, a guesser could start again each time the owner signs in.
 *
 * A refusal comes without checking the password. An attempt is counted, in both, before its
 * password is checked, so guesses sent at once cannot all be checked before any is counted; a
 * refused attempt is not counted, so asking again while refused neither makes the wait longer
 * nor brings the account's bound nearer. Emails that belong to no account are counted the same
 * way: the answer must not tell which addresses have one. The email (normalised as sign-in
 * matches it: trimmed, any letter case) and the address are kept only as HMACs, under a key
 * derived from the service key, so Redis holds neither, nor anything a dictionary of emails
 * could be checked against. Should Redis not answer, the password is checked anyway (the
 * per-address rate limit still holds), rather than no one signing in.
 */
import type Redis from 'ioredis';
import { createHmac } from 'node:crypto';
import { addressBucket } from '../common/client-address';
import { withinTimeout } from '../common/timeout';
import { takeFromWindows } from '../rate-limit/rolling-window';
import { REDIS_WAIT_MS } from '../redis/redis.module';

export const WINDOW_MS = 15 * 60_000;

/**
 * KEYS as `attempt` takes them: the account and address, the account. The attempt that succeeded
 * is the newest of its address's (added to both under one member); the account keeps every other.
 */
const SUCCEEDED = `
local own = redis.call('ZRANGE', KEYS[1], -1, -1)[1]
if own then redis.call('ZREM', KEYS[2], own) end
redis.call('DEL', KEYS[1])
`;

export interface ThrottleLimits {
  perAddress: number;
  perAccount: number;
}

export class SignInThrottle {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly limits: ThrottleLimits,
    private readonly hmacKey: () => Promise<Buffer>,
  ) {}

  private async keys(email: string, address: string): Promise<[string, string]> {
    const key = await this.hmacKey();
    const account = email.trim().toLowerCase();
    const digest = (parts: string[]) => createHmac('sha256', key).update(JSON.stringify(parts)).digest('base64url');
    // Not `sign-in:failures:*`, the counters of versions before the rolling windows, which one of
    // them running beside this one would read, and write, as the wrong type.
    return [`${this.prefix}sign-in:failed:address:${digest([account, addressBucket(address)])}`, `${this.prefix}sign-in:failed:account:${digest([account])}`];
  }

  /** Counts an attempt for `email` from `address`: undefined when it may go ahead, else the minutes until it may. */
  async attempt(email: string, address: string): Promise<number | undefined> {
    if (this.redis.status !== 'ready') return undefined;
    const [addressKey, accountKey] = await this.keys(email, address);
    const windows = [
      { key: addressKey, limit: this.limits.perAddress },
      { key: accountKey, limit: this.limits.perAccount },
    ];
    const taken = await withinTimeout(takeFromWindows(this.redis, windows, WINDOW_MS), REDIS_WAIT_MS);
    if (!taken || taken.allowed) return undefined;
    // Until every count that is full has a place again.
    const wait = Math.max(...taken.windows.map((w, i) => (w.count >= windows[i].limit ? w.msBeforeNext : 0)));
    return Math.max(1, Math.ceil(wait / 60_000));
  }

  /** A right password. */
  async succeeded(email: string, address: string): Promise<void> {
    await withinTimeout(this.redis.eval(SUCCEEDED, 2, ...(await this.keys(email, address))), REDIS_WAIT_MS);
  }
}
