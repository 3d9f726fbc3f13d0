/**
 * One attempt's HTTP exchange with a webhook's receiver: a POST through undici's dispatcher
 * interface under one timer, answering the final status code (its body dropped), with
 * undici's misleading errors worded for the delivery's record (webhook-dispatcher.ts).
 */
import type { Agent, Dispatcher } from 'undici';

/** The attempt's timer ran out (its message is the delivery's recorded error). */
export class AttemptTimeout extends Error {}

/**
 * One POST through undici's dispatcher interface, resolving to the status code once the response
 * has ended (its body read and dropped, so the connection is reused). Cheaper per attempt than
 * `request()`, which builds a body stream and an abort signal for each (docs/events.md). The one
 * timer bounds the whole exchange, connecting to the receiver included (the agent has no cap per
 * host, so an attempt never waits for a connection another webhook holds). A response whose final
 * status came in time is its status (SPEC 6.3.1: a 2xx completes the delivery), whatever then
 * becomes of its body, which nobody reads: too slow (cut off with its connection at the timer),
 * reset, or framed wrongly. An interim (1xx) status is no answer: an attempt that gets nothing
 * after it times out as one whose receiver never answered.
 */
export function exchange(agent: Agent, url: URL, headers: Record<string, string>, body: Buffer, timeoutMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    let controller: Dispatcher.DispatchController | undefined;
    let statusCode = 0;
    let settled = false;
    const settle = (err?: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (err) reject(err);
      else resolve(statusCode);
    };
    const timer = setTimeout(() => {
      const err = new AttemptTimeout(`timeout after ${timeoutMs} ms`);
      settle(statusCode ? undefined : err);
      controller?.abort(err);
    }, timeoutMs);
    agent.dispatch(
      { origin: url.origin, path: url.pathname + url.search, method: 'POST', headers, body },
      {
        onRequestStart(c) {
          controller = c;
          if (settled) c.abort(new AttemptTimeout('timed out before it started'));
        },
        onResponseStart(_c, status) {
          if (status >= 200) statusCode = status;
        },
        onResponseEnd() {
          settle();
        },
        onResponseError(_c, err) {
          settle(statusCode ? undefined : (unparsedAnswer(err) ?? err));
        },
      },
    );
  });
}

/**
 * What undici's error means when no final status came, where its words mislead (7.x, HTTP/1.1).
 * It has no way to take a `100 Continue` it did not ask for (it sends no `Expect`): it cuts the
 * connection with only "bad response", which it says of nothing else while a request is under
 * way. A header section its parser refuses (both Content-Length and Transfer-Encoding, which RFC
 * 9112 6.3 says ought to be an error: a smuggling signal) reaches no handler as a status, and is
 * called a body length mismatch when it named a Content-Length, no body having been read.
 */
function unparsedAnswer(err: Error): Error | undefined {
  const code = (err as { code?: string }).code;
  if (code === 'UND_ERR_SOCKET' && err.message === 'bad response')
    return new Error('the receiver sent 100 Continue unasked, before its answer; undici refuses it: send the final status only');
  if (code === 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH')
    return new Error('the response headers did not parse (such as both Content-Length and Transfer-Encoding); no status was read');
  return undefined;
}
