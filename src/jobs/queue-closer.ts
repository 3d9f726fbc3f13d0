/**
 * Closes every Bull queue within a deadline. Bull's own close() (what @nestjs/bull calls at
 * shutdown) waits for its blocking connection to connect again and for each socket to end;
 * while Redis accepts connections but never answers (a partition behind a proxy or load
 * balancer), neither happens, and the shutdown hung until main's 25 s deadline ended the
 * process with exit code 1, before the hooks after it (Redis, pools) had run. Jobs have ended
 * by then: their owners' beforeApplicationShutdown hooks wait for them.
 */
import { getQueueToken } from '@nestjs/bull';
import { Injectable, OnModuleInit } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { Queue } from 'bull';
import { withinTimeout } from '../common/timeout';
import { QUEUES } from './job-catalogue';

const QUEUE_CLOSE_MS = 3_000;

@Injectable()
export class QueueCloser implements OnModuleInit {
  private closing?: Promise<void>;

  constructor(private readonly moduleRef: ModuleRef) {}

  /** Each queue's hook closes them all at once (Nest calls the hooks one module after another). */
  onModuleInit(): void {
    const queues = Object.values(QUEUES).map((name) => this.moduleRef.get<ClosableQueue>(getQueueToken(name), { strict: false }));
    // @nestjs/bull gives each queue this hook (buildQueue); one that moved would be left in place.
    if (queues.some((q) => typeof q.onApplicationShutdown !== 'function')) throw new Error('@nestjs/bull no longer closes its queues through onApplicationShutdown');
    for (const queue of queues) queue.onApplicationShutdown = () => (this.closing ??= Promise.all(queues.map((q) => closeWithin(q, QUEUE_CLOSE_MS))).then(() => undefined));
  }
}

type ClosableQueue = Queue & { onApplicationShutdown?: () => Promise<void> };

/** `queue.close()`, or after `ms` its connections dropped: a socket left half-closed would keep the process alive. */
async function closeWithin(queue: Queue, ms: number): Promise<void> {
  const closing = queue.close();
  closing.catch(() => undefined);
  if ((await withinTimeout(closing.then(() => true), ms)) === true) return;
  for (const client of queue.clients) {
    client.disconnect();
    (client as unknown as { stream?: { destroy(): void } }).stream?.destroy();
  }
}
