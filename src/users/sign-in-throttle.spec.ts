import type Redis from 'ioredis';
import { SignInThrottle } from './sign-in-throttle';

/** The keys each attempt was counted under (the account and address, the account), and each success. */
function recordingThrottle(): { throttle: SignInThrottle; keys: string[][] } {
  const keys: string[][] = [];
  const record = async (_script: string, numKeys: number, ...args: unknown[]) => {
    keys.push(args.slice(0, numKeys) as string[]);
    return 0;
  };
  const redis = {
    status: 'ready',
    eval: record,
    // The rolling windows' script (rolling-window.ts), let through.
    defineCommand(name: string) {
      Object.assign(this, { [name]: async (numKeys: number, ...args: unknown[]) => (await record('', numKeys, ...args), [1, 0, 1, 0, 1, 0]) });
    },
  } as unknown as Redis;
  const throttle = new SignInThrottle(redis, 'p:', { perAddress: 10, perAccount: 100 }, async () => Buffer.alloc(32, 7));
  return { throttle, keys };
}

describe('SignInThrottle: the count per address', () => {
  it('counts IPv6 addresses per /64 and an IPv4-mapped address as its IPv4 address', async () => {
    const { throttle, keys } = recordingThrottle();
    const addressKey = async (address: string) => {
      await throttle.attempt('Someone@Example.com', address);
      return keys[keys.length - 1][0];
    };
    expect(await addressKey('2001:db8:1:2::1')).toBe(await addressKey('2001:db8:1:2:dead:beef:0:42'));
    expect(await addressKey('2001:db8:1:2::1')).not.toBe(await addressKey('2001:db8:1:3::1'));
    expect(await addressKey('203.0.113.7')).toBe(await addressKey('::ffff:203.0.113.7'));
    expect(await addressKey('203.0.113.7')).not.toBe(await addressKey('203.0.113.8'));
  });

  it('a success clears the count the attempt was made in, from any address of the /64', async () => {
    const { throttle, keys } = recordingThrottle();
    await throttle.attempt('someone@example.com', '2001:db8:1:2::1');
    await throttle.succeeded('someone@example.com', '2001:db8:1:2::99');
    expect(keys[1]).toEqual(keys[0]);
  });
});
