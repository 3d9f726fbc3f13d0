/** The service under benchmark: the compiled dist/src/main.js (what `npm start` runs) in a child process on loopback. */
import { ChildProcess, fork } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';

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

/** Starts the service with `env` on 127.0.0.1 and resolves once /health answers 200. */
export async function startService(env: Record<string, string>): Promise<{ child: ChildProcess; url: string }> {
  const port = await freePort();
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
