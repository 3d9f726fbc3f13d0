/**
 * RedisPubSub against a real Redis behind a proxy: what its listeners may rely on when the
 * subscription's connection comes back.
 */
import Redis from 'ioredis';
import { AppConfig } from '../src/config/app-config';
import { RedisPubSub } from '../src/redis/redis.module';
import { REDIS_URL, uniqueName } from './support/app';
import { TcpProxy } from './support/tcp-proxy';
import { waitFor } from './support/wait';

describe('RedisPubSub', () => {
  it('tells its listeners the subscription is back once it is: a message they cause then is heard', async () => {
    const proxy = await new TcpProxy('127.0.0.1', Number(new URL(REDIS_URL).port || 6379)).start();
    const redis = new Redis(`redis://127.0.0.1:${proxy.port}`, { maxRetriesPerRequest: 2 });
    const direct = new Redis(REDIS_URL);
    const pubsub = new RedisPubSub({ REDIS_PREFIX: `${uniqueName('svcps')}:` } as AppConfig, redis);
    try {
      const heard: string[] = [];
      await pubsub.subscribe('changes', (message) => heard.push(message));
      await direct.publish(pubsub.channel('changes'), 'before');
      await waitFor(() => heard.includes('before'), 'the first message');
      // A listener catching up publishes (or reads its record) as soon as it is told.
      pubsub.onResubscribed(() => void direct.publish(pubsub.channel('changes'), 'caught up'));
      // Slow enough that a SUBSCRIBE not yet answered is still on its way when the listener runs.
      proxy.delayMs = 300;
      await proxy.cut();
      await proxy.restore();
      await waitFor(() => heard.includes('caught up'), 'the message published by the listener', 10_000);
    } finally {
      await pubsub.onApplicationShutdown();
      redis.disconnect();
      direct.disconnect();
      await proxy.stop();
    }
  });
});
