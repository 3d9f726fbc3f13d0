/**
 * Ends a connection whose request body is being refused half-way (413 `blob_too_large`)
 * without losing the response, as RFC 9112 §9.6 describes: send the response with
 * `Connection: close`, half-close (FIN), keep reading and discarding what the client still
 * sends, and close fully once the client closes or after LINGER_MS.
 *
 * Node's own handling of `Connection: close` destroys the socket right after the response is
 * flushed. With the client still uploading, unread bytes then make the kernel answer with a
 * reset, and clients commonly report EPIPE/ECONNRESET instead of the 413 they were sent (in
 * a loop of 5 MiB uploads against a 1 KiB limit, about 4 in 10). Node calls
 * `socket.destroySoon()` for that close, so this replaces it on this one socket. Should a
 * future Node not call it, the behaviour falls back to Node's immediate close.
 */
import type { FastifyReply } from 'fastify';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';

const LINGER_MS = 2000;

export function closeAfterResponse(req: IncomingMessage, reply: FastifyReply, lingerMs = LINGER_MS): void {
  reply.header('Connection', 'close');
  const socket = req.socket as Socket & { destroySoon?: () => void };
  socket.destroySoon = function lingeringClose(this: Socket): void {
    this.end();
    const timer = setTimeout(() => this.destroy(), lingerMs);
    timer.unref();
    this.once('close', () => clearTimeout(timer));
  };
  req.on('error', () => undefined);
  req.resume(); // discard the unread rest of the body
}
