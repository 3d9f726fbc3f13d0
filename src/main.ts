/** Process entry: load config, start the service, and turn start-up failures into one line. */
import 'reflect-metadata';
import { createApp } from './app.factory';
import { ConfigError, loadConfig } from './config/app-config';
import { StartupError } from './common/startup-error';

async function main(): Promise<void> {
  const config = loadConfig();
  const app = await createApp(config);
  await app.listen(config.PORT, config.HOST);
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError || err instanceof StartupError) {
    process.stderr.write(`svc: ${err.message}\n`);
  } else {
    process.stderr.write(`svc: failed to start: ${(err as Error)?.message ?? String(err)}\n`);
  }
  process.exit(1);
});
