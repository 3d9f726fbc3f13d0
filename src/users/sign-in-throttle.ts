/**
 * Failed sign-ins, for every form that checks a password (the sign-in pages and the device page,
 * through UsersService.authenticate). Two counts, in Redis so that every instance shares them,
 * each in a window of WINDOW_MS that starts with its first attempt:
 *
 * - per account and client address (SIGN_IN_MAX_FAILURES_PER_ADDRESS, 10): once it is reached,
 *   that address is refused for that account for the rest of the window (an IPv6 address with
 *   its whole /64, which one client can send from: `addressBucket`, client-address.ts). A
 *   refusal that held for the account from everywhere would let anyone keep its owner out with a
 *   few requests; held for one address, it keeps out only whoever guesses from there. A success
 *   clears it.
 * - per account from every address (SIGN_IN_MAX_FAILURES_PER_ACCOUNT, 100): the bound on
 *   guessing from many addresses, which the count per address (and the per-address rate limit)
 *   cannot give. Once it is reached the account is refused from everywhere for the rest of the
 *   window: a lock-out still, but one that takes that many guesses, from at least that many
 *   addresses over the limit per address. A success takes back its own attempt and no other: the
 *   owner signing in says nothing of the guesses made elsewhere, and were they forgotten, a
 *   guesser could start again each time the owner signs in.
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
import { REDIS_WAIT_MS } from '../redis/redis.module';

export const WINDOW_MS = 15 * 60_000;

/**
 * KEYS: the account and address, the account. ARGV: the window, the limit per address, the
 * limit per account. The milliseconds until the attempt may be made, or 0 when it was counted.
 */
const ATTEMPT = `
local wait = 0
for i = 1, 2 do
  if tonumber(redis.call('GET', KEYS[i]) or '0') >= tonumber(ARGV[i + 1]) then wait = math.max(wait, redis.call('PTTL', KEYS[i]), 1) end
end
if wait > 0 then return wait end
for i = 1, 2 do
  redis.call('INCR', KEYS[i])
  if redis.call('PTTL', KEYS[i]) < 0 then redis.call('PEXPIRE', KEYS[i], ARGV[1]) end
end
return 0
`;

/** KEYS as ATTEMPT's: the address's failures are forgotten; the account's keep all but this attempt. */
const SUCCEEDED = `
redis.call('DEL', KEYS[1])
if tonumber(redis.call('GET', KEYS[2]) or '0') > 0 then redis.call('DECR', KEYS[2]) end
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
    return [`${this.prefix}sign-in:failures:address:${digest([account, addressBucket(address)])}`, `${this.prefix}sign-in:failures:account:${digest([account])}`];
  }

  /** Counts an attempt for `email` from `address`: undefined when it may go ahead, else the minutes until it may. */
  async attempt(email: string, address: string): Promise<number | undefined> {
    if (this.redis.status !== 'ready') return undefined;
    const { perAddress, perAccount } = this.limits;
    const wait = await withinTimeout(this.redis.eval(ATTEMPT, 2, ...(await this.keys(email, address)), WINDOW_MS, perAddress, perAccount) as Promise<number>, REDIS_WAIT_MS);
    return wait ? Math.max(1, Math.ceil(wait / 60_000)) : undefined;
  }

  /** A right password. */
  async succeeded(email: string, address: string): Promise<void> {
    await withinTimeout(this.redis.eval(SUCCEEDED, 2, ...(await this.keys(email, address))), REDIS_WAIT_MS);
  }
}
