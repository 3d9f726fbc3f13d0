/** Process entry: load config, start the service, and turn start-up failures into one line. */
import 'reflect-metadata';
import { createApp } from './app.factory';
import { ConfigError, loadConfig } from './config/app-config';
import { StartupError } from './common/startup-error';

/** A graceful shutdown that takes longer than this (a hook that never settles) ends the process anyway. */
const SHUTDOWN_DEADLINE_MS = 25_000;

async function main(): Promise<void> {
  const config = loadConfig();
  const app = await createApp(config);
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => {
      setTimeout(() => {
        process.stderr.write(`svc: shutdown after ${signal} did not finish within ${SHUTDOWN_DEADLINE_MS} ms; exiting\n`);
        process.exit(1);
      }, SHUTDOWN_DEADLINE_MS).unref();
    });
  }
  await app.listen(config.PORT, config.HOST).catch(async (err: NodeJS.ErrnoException) => {
    await app.close().catch(() => undefined);
    // A port taken, a host that does not resolve or is not this machine's: the setting to change.
    throw new StartupError(`cannot listen on ${config.HOST}:${config.PORT} (${err.code ?? err.message}); set PORT or HOST`);
  });
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError || err instanceof StartupError) {
    process.stderr.write(`svc: ${err.message}\n`);
  } else {
    process.stderr.write(`svc: failed to start: ${(err as Error)?.message ?? String(err)}\n`);
  }
  process.exit(1);
});
