/** The service under benchmark: the compiled dist/src/main.js (what `npm start` runs) in a child process on loopback. */
import { ChildProcess, execSync, fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { Client } from 'pg';

/** A port free on loopback right now, for the service to listen on. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * Starts the service with `env` on 127.0.0.1 and resolves once /health answers 200. On `port`
 * when given (for a caller that must know the URL beforehand, e.g. for SVC_BASE_URL), else on a free one.
 */
export async function startService(env: Record<string, string>, port?: number): Promise<{ child: ChildProcess; url: string }> {
  port ??= await freePort();
  const child = fork(join(__dirname, '..', 'dist', 'src', 'main.js'), [], {
    execArgv: process.env.BENCH_SERVICE_NODE_OPTIONS ? process.env.BENCH_SERVICE_NODE_OPTIONS.split(' ') : [],
    env: { ...process.env, HOST: '127.0.0.1', ...env, PORT: String(port) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const url = `http://127.0.0.1:${port}`;
  const exited = new Promise<never>((_, reject) => child.once('exit', (code) => reject(new Error(`service exited with ${code}`))));
  const up = (async () => {
    for (;;) {
      if (await fetch(`${url}/health`).then((r) => r.ok, () => false)) return { child, url };
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  return Promise.race([up, exited]);
}

/** Stops the service and waits until its process has ended. */
export async function stopService(child: ChildProcess): Promise<void> {
  child.kill('SIGTERM');
  if (child.exitCode === null && child.signalCode === null) await new Promise((r) => child.once('exit', r));
}

/** Drops the database of `databaseUrl` (the service creates it again at start). */
export async function dropDatabase(databaseUrl: string): Promise<void> {
  const url = new URL(databaseUrl);
  const name = url.pathname.slice(1);
  url.pathname = '/postgres';
  const admin = new Client({ connectionString: url.toString() });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS "${name.replace(/"/g, '""')}" WITH (FORCE)`);
  await admin.end();
}

/** Clock ticks per second of /proc's CPU times. */
export const CLOCK_TICKS = (() => {
  try {
    return Number(execSync('getconf CLK_TCK', { stdio: ['ignore', 'pipe', 'ignore'] }).toString()) || 100;
  } catch {
    return 100;
  }
})();

/** A process's CPU time so far (user + system) in ms, from /proc (Linux); 0 if unreadable. */
export function cpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
  } catch {
    return 0;
  }
}

/** The machine's busy CPU ms so far (all cores), from /proc/stat: to see whether something else was running. */
export function machineBusyMs(): number {
  try {
    const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const idle = cpu[3] + (cpu[4] ?? 0);
    return ((cpu.reduce((a, b) => a + b, 0) - idle) * 1000) / CLOCK_TICKS;
  } catch {
    return 0;
  }
}

/** The p-th percentile (nearest rank) of unsorted values; NaN for none. */
export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}
