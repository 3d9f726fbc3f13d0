/** Runs the built service (`node dist/src/main.js`) as a child process, the way `npm start` does. */
import { ChildProcess, execSync, spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { readdirSync, statSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { waitFor } from './wait';

export const ROOT = path.resolve(__dirname, '..', '..');
export const MAIN = path.join(ROOT, 'dist', 'src', 'main.js');

function newestSource(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(full));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.spec.ts')) newest = Math.max(newest, statSync(full).mtimeMs);
  }
  return newest;
}

/** Builds dist/ when it is missing or older than the sources. */
export function ensureBuilt(): void {
  let built = 0;
  try {
    built = statSync(MAIN).mtimeMs;
  } catch {
    built = 0;
  }
  if (built < newestSource(path.join(ROOT, 'src'))) {
    execSync('npm run build', { cwd: ROOT, stdio: 'pipe', timeout: 170_000 });
  }
}

/**
 * A loopback port free now, for a service that must know its port before it listens (its
 * SVC_BASE_URL names it). Drawn below the kernel's ephemeral range (32768-60999 by default):
 * a port from listen(0) may meanwhile be taken as the local end of an outgoing connection
 * (to PostgreSQL, Redis) or by another test worker's listen(0), and the later listen then
 * fails with EADDRINUSE, which a CI run once did.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = 10_000 + randomInt(22_000);
    const server = net.createServer();
    const free = await new Promise<boolean>((resolve) => {
      server.once('error', () => resolve(false));
      server.listen(port, '127.0.0.1', () => resolve(true));
    });
    if (free) {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      return port;
    }
  }
}

export interface Service {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code (or signal) once the process has ended. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stop(): Promise<void>;
}

export function runService(env: Record<string, string>): Service {
  const child = spawn(process.execPath, [MAIN], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  let ended = false;
  void exited.then(() => (ended = true));
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    stop: async () => {
      if (!ended) child.kill('SIGTERM');
      const timer = setTimeout(() => !ended && child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Waits until GET /health answers 200 (or the process dies). */
export async function waitHealthy(service: Service, baseUrl: string): Promise<void> {
  let dead = false;
  void service.exited.then(() => (dead = true));
  await waitFor(async () => {
    if (dead) throw new Error(`service exited early: ${service.stderr()}`);
    const res = await fetch(`${baseUrl}/health`).catch(() => undefined);
    return res?.status === 200;
  }, `${baseUrl}/health to answer 200`, 60_000, 100).catch((e) => {
    if (dead) throw new Error(`service exited: ${service.stderr()}`);
    throw e;
  });
}
