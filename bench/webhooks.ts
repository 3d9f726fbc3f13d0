/**
 * `npm run bench:webhooks`: the cost and speed of events, on loopback only.
 *
 *   1. Starts the compiled service (dist/src/main.js, as `npm start` runs it) in a child
 *      process against a fresh database (BENCH_DATABASE_URL, default .../svc_bench_webhooks),
 *      and a webhook receiver on 127.0.0.1 that answers 200 at once, in a child process of its
 *      own so it does not slow the load generator's event loop.
 *   2. Registers 10 webhooks for every event, then alternates BENCH_ROUNDS rounds (default 3)
 *      of POST /items under autocannon at 10 connections for BENCH_DURATION seconds (default
 *      10): once with the webhooks disabled ("none": nothing is delivered) and once enabled.
 *      Between rounds it waits until every delivery owed has arrived; before each phase, until the
 *      relay is done, then VACUUMs the tables the phases write (see `settle`).
 *   3. Prints the write path's requests/s in both modes and their ratio; deliveries/s (all
 *      deliveries of an enabled round over the time from its first to its last arrival); and
 *      the time from the write to the first attempt's arrival at the receiver (p50/p99), measured
 *      from the item's `created_at` (the transaction's start, so a slight overestimate); and per
 *      round, the CPU ms per write of each process (service, PostgreSQL, receiver, load
 *      generator) and of the whole machine, deliveries included.
 *   BENCH_RATE=<writes/s> offers a fixed rate instead, to see the CPU per write unsaturated.
 *
 * Logs and rate limits are off in the service. Not a test: nothing is asserted.
 */
import autocannon from 'autocannon';
import { execSync, fork } from 'node:child_process';
import { createServer } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { Client } from 'pg';
import { cpuMs, dropDatabase, machineBusyMs, percentile, startService } from './service';

const DATABASE_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/svc_bench_webhooks';
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const ROUNDS = Math.max(1, Math.floor(Number(process.env.BENCH_ROUNDS ?? 3)));
/** BENCH_RATE: writes/s to offer instead of as many as 10 connections manage (CPU per write without saturation). */
const RATE = Number(process.env.BENCH_RATE ?? 0);
const WEBHOOKS = 10;
const CONNECTIONS = 10;

interface ReceiverStats {
  count: number;
  firstAt: number;
  lastAt: number;
  firstAttemptMs: number[];
}

/** Counts deliveries and, per event, the delay from the item's creation to its first arrival. */
class Receiver implements ReceiverStats {
  count = 0;
  firstAt = 0;
  lastAt = 0;
  readonly firstAttemptMs: number[] = [];
  protected readonly seen = new Set<string>();

  async start(): Promise<string> {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        this.arrived(String(req.headers['x-svc-event-id']), () => Buffer.concat(chunks).toString('utf8'));
        res.end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    server.unref();
    return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  }

  reset(): void {
    this.count = this.firstAt = this.lastAt = 0;
  }

  /** A delivery in: counted, and the first of its event timed from the item's creation. */
  protected arrived(eventId: string, body: () => string): void {
    const now = Date.now();
    this.count++;
    this.firstAt ||= now;
    this.lastAt = now;
    if (this.seen.has(eventId)) return;
    this.seen.add(eventId);
    const parsed = JSON.parse(body());
    if (parsed.event === 'item.created') this.firstAttemptMs.push(now - Date.parse(parsed.item.created_at));
  }
}

/**
 * The same receiver on bare sockets: a minimal HTTP/1.1 responder (Content-Length bodies,
 * keep-alive), for a smaller share of the cores that the service and PostgreSQL also need.
 */
class LeanReceiver extends Receiver {
  async start(): Promise<string> {
    const server = createNetServer((socket) => {
      socket.setNoDelay(true);
      let buffered: Buffer = Buffer.alloc(0);
      socket.on('data', (chunk: Buffer) => {
        buffered = buffered.length ? Buffer.concat([buffered, chunk]) : chunk;
        let answers = '';
        for (;;) {
          const end = buffered.indexOf('\r\n\r\n');
          if (end === -1) break;
          const head = buffered.toString('latin1', 0, end);
          const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
          if (buffered.length < end + 4 + length) break;
          this.arrived(/\r\nx-svc-event-id:\s*(\S+)/i.exec(head)?.[1] ?? '', () => buffered.toString('utf8', end + 4, end + 4 + length));
          buffered = buffered.subarray(end + 4 + length);
          answers += 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n';
        }
        if (answers) socket.write(answers);
      });
      socket.on('error', () => socket.destroy());
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    server.unref();
    return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  }
}

/** The receiver's child process: answers `stats` and `reset` messages from the parent. */
async function receiverChild(): Promise<void> {
  const receiver = process.env.BENCH_RECEIVER === 'node-http' ? new Receiver() : new LeanReceiver();
  const url = await receiver.start();
  process.on('message', (msg: string) => {
    if (msg === 'reset') receiver.reset();
    const { count, firstAt, lastAt, firstAttemptMs } = receiver;
    process.send!({ url, stats: { count, firstAt, lastAt, firstAttemptMs } });
  });
  process.send!({ url });
}

/**
 * Before each phase: the relay done with the previous one, then VACUUM on what a phase writes,
 * as autovacuum would keep up in a deployment (this machine may run with it off). Without it
 * the outbox's dead rows pile up round after round and each round costs PostgreSQL more.
 */
async function settle(): Promise<void> {
  const db = new Client({ connectionString: DATABASE_URL });
  await db.connect();
  try {
    const deadline = Date.now() + 300_000;
    while (Date.now() < deadline && (await db.query(`SELECT 1 FROM events WHERE dispatched_at IS NULL LIMIT 1`)).rowCount) {
      await new Promise((r) => setTimeout(r, 200));
    }
    await db.query('VACUUM ANALYZE items, item_versions, events, webhook_deliveries');
  } finally {
    await db.end();
  }
}

/** The parent's handle on the receiver child. */
class RemoteReceiver {
  private readonly child = fork(__filename, ['--receiver'], { execArgv: ['-r', 'ts-node/register/transpile-only'] });

  url(): Promise<string> {
    return new Promise((resolve) => this.child.once('message', (m: { url: string }) => resolve(m.url)));
  }

  ask(msg: 'stats' | 'reset'): Promise<ReceiverStats> {
    const answer = new Promise<ReceiverStats>((resolve) => this.child.once('message', (m: { stats: ReceiverStats }) => resolve(m.stats)));
    this.child.send(msg);
    return answer;
  }

  get pid(): number {
    return this.child.pid!;
  }

  stop(): void {
    this.child.kill();
  }
}

// ------------------------------------------------------------------ CPU per process

/** CPU ms so far of the processes that share the machine during a round. */
interface CpuMark {
  service: number;
  postgres: number;
  receiver: number;
  load: number;
  machine: number;
}

/** Every PostgreSQL process's CPU ms so far (the postmaster's children come and go with the pools). */
function postgresCpuMs(): number {
  let pids: number[] = [];
  try {
    pids = execSync('pgrep -x postgres', { stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim().split('\n').map(Number);
  } catch {
    return 0;
  }
  return pids.reduce((sum, pid) => sum + cpuMs(pid), 0);
}


function cpuMark(servicePid: number, receiverPid: number): CpuMark {
  const self = process.cpuUsage();
  return {
    service: cpuMs(servicePid),
    postgres: postgresCpuMs(),
    receiver: cpuMs(receiverPid),
    load: (self.user + self.system) / 1000,
    machine: machineBusyMs(),
  };
}

/** CPU ms per write between two marks, per process group. */
function cpuPerWrite(from: CpuMark, to: CpuMark, writes: number): CpuMark {
  const per = (k: keyof CpuMark) => (to[k] - from[k]) / Math.max(1, writes);
  return { service: per('service'), postgres: per('postgres'), receiver: per('receiver'), load: per('load'), machine: per('machine') };
}

const formatCpu = (c: CpuMark) =>
  `service ${c.service.toFixed(2)}, postgres ${c.postgres.toFixed(2)}, receiver ${c.receiver.toFixed(2)}, load generator ${c.load.toFixed(2)}; machine ${c.machine.toFixed(2)}`;


async function writeLoad(url: string, key: string): Promise<{ rps: number; written: number }> {
  const result = await autocannon({
    url: `${url}/items`,
    method: 'POST',
    connections: CONNECTIONS,
    ...(RATE ? { overallRate: RATE } : {}),
    duration: DURATION,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ type: 'core.note', properties: { title: 'bench', body: 'a note written under load' } }),
  });
  return { rps: result.requests.average, written: result['2xx'] };
}

async function main(): Promise<void> {
  await dropDatabase(DATABASE_URL);
  const receiver = new RemoteReceiver();
  const target = await receiver.url();
  const { child, url } = await startService({
    DATABASE_URL,
    REDIS_URL,
    REDIS_PREFIX: 'svc_bench_webhooks:',
    LOG_LEVEL: 'silent',
    RATE_LIMIT_ENABLED: 'false',
  });
  try {
    const { key } = (await (await fetch(`${url}/keys`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json()) as { key: string };
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${url}${path}`, { method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body ?? {}) });
      return (await res.json()) as { id: string };
    };
    const hooks: string[] = [];
    for (let i = 0; i < WEBHOOKS; i++) hooks.push((await call('POST', '/webhooks', { url: `${target}/hook-${i}`, events: ['*'], disabled: true })).id);
    const setDisabled = (disabled: boolean) => Promise.all(hooks.map((id) => call('PATCH', `/webhooks/${id}`, { disabled })));

    await writeLoad(url, key); // warm-up, webhooks disabled
    const none: number[] = [];
    const subscribed: number[] = [];
    const deliveryRates: number[] = [];
    const cpuNone: CpuMark[] = [];
    const cpuSubscribed: CpuMark[] = [];
    const mark = () => cpuMark(child.pid!, receiver.pid);
    for (let round = 0; round < ROUNDS; round++) {
      await settle();
      let before = mark();
      const plain = await writeLoad(url, key);
      none.push(plain.rps);
      cpuNone.push(cpuPerWrite(before, mark(), plain.written));
      await setDisabled(false);
      await settle();
      await receiver.ask('reset');
      before = mark();
      const { rps, written } = await writeLoad(url, key);
      subscribed.push(rps);
      const owed = written * WEBHOOKS;
      const deadline = Date.now() + 300_000;
      let stats = await receiver.ask('stats');
      while (stats.count < owed && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 200));
        stats = await receiver.ask('stats');
      }
      // Until the last delivery arrived: the deliveries' whole cost, also what ran after the writes.
      cpuSubscribed.push(cpuPerWrite(before, mark(), written));
      deliveryRates.push(stats.count / ((stats.lastAt - stats.firstAt) / 1000));
      console.log(
        `round ${round + 1}: writes/s none ${none[round].toFixed(0)}, with ${WEBHOOKS} webhooks ${rps.toFixed(0)}; ` +
          `${stats.count}/${owed} deliveries at ${deliveryRates[round].toFixed(0)}/s`,
      );
      console.log(`  CPU ms per write, none: ${formatCpu(cpuNone[round])}`);
      console.log(`  CPU ms per write, with ${WEBHOOKS}: ${formatCpu(cpuSubscribed[round])}`);
      await setDisabled(true);
    }
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    console.log(`\nwrite path, ${CONNECTIONS} connections, ${ROUNDS} alternating rounds of ${DURATION} s`);
    console.log(`  POST /items req/s: none ${mean(none).toFixed(0)}, with ${WEBHOOKS} webhooks ${mean(subscribed).toFixed(0)}; ratio ${(mean(subscribed) / mean(none)).toFixed(2)}`);
    console.log(`  deliveries/s: ${deliveryRates.map((r) => r.toFixed(0)).join(', ')}`);
    const { firstAttemptMs } = await receiver.ask('stats');
    console.log(`  write to first attempt (ms, ${firstAttemptMs.length} events): p50 ${percentile(firstAttemptMs, 50)}, p99 ${percentile(firstAttemptMs, 99)}`);
  } finally {
    child.kill('SIGTERM');
    receiver.stop();
  }
}

(process.argv.includes('--receiver') ? receiverChild() : main()).catch((err) => {
  console.error(err);
  process.exit(1);
});
