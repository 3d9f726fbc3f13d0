/**
 * oidc-provider's own notices and warnings ("Unsupported runtime" on Node 20, "already parsed
 * request body detected" at the first OAuth request with a body, which the service reads itself):
 * it writes them with console.info and console.warn as plain text, coloured on a terminal, the
 * only lines of the process's output that were not the service's JSON logs. They go through the
 * service's logger instead, at info and warn, with `source: "oidc-provider"`; every other console
 * line passes as before.
 */
import { Logger } from '@nestjs/common';

const NOTICE = /^oidc-provider (NOTICE|WARNING): /;
const COLOURS = /\x1b\[[0-9;]*m/g;

let routed = false;

/** From now on, in this process; call before the provider is first imported, whose import warns. */
export function routeProviderNotices(logger = new Logger('OAuth')): void {
  if (routed) return;
  routed = true;
  for (const method of ['info', 'warn'] as const) {
    const original = console[method].bind(console);
    console[method] = (...args: unknown[]) => {
      const text = args.length === 1 && typeof args[0] === 'string' ? args[0].replace(COLOURS, '') : undefined;
      const notice = text && NOTICE.exec(text);
      if (!notice) return original(...args);
      const message = text.slice(notice[0].length);
      if (notice[1] === 'WARNING') logger.warn({ source: 'oidc-provider' }, message);
      else logger.log({ source: 'oidc-provider' }, message);
    };
  }
}
