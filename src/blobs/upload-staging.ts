/**
 * Receives an upload body into a staging file while hashing (SHA-256) and counting it, with
 * backpressure, so memory use is one stream buffer whatever the size.
 *
 * The request is never destroyed here, not even past the size limit: destroying it would
 * reset the connection and the client would see "connection reset" instead of the 413. Past
 * the limit the rest of the body is read and thrown away (the controller then answers with
 * `Connection: close`, see lingering-close.ts, which bounds how long that goes on).
 */
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { PassThrough, type Readable } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';

export interface StagedUpload {
  hash: string;
  size: number;
}

export class UploadTooLarge extends Error {
  constructor(readonly maxBytes: number) {
    super(`upload exceeds ${maxBytes} bytes`);
  }
}

export class UploadAborted extends Error {
  constructor() {
    super('the client closed the connection before the upload was complete');
  }
}

/** The body's bytes are not what its Content-Encoding says they are. */
export class UploadNotEncodedAsDeclared extends Error {
  constructor() {
    super('the request body does not match its Content-Encoding');
  }
}

/** The Content-Encodings a blob upload may use: those JSON bodies take (body-parsing.ts). */
const DECODERS = { gzip: createGunzip, deflate: createInflate, br: createBrotliDecompress } as const;

export const isUploadEncoding = (coding: string): coding is keyof typeof DECODERS | 'identity' => coding === 'identity' || coding in DECODERS;

/**
 * The content of an upload whose body is encoded (`coding` from isUploadEncoding): the request
 * decoded as it arrives, so that the blob is the bytes the client meant, hashed and counted
 * decoded. The bytes as sent count against `maxBytes` too (more than that ends the content with
 * UploadTooLarge): a body can grow without its content growing (empty gzip members decode to
 * nothing), and it costs bandwidth and decoding all the same. Bytes the decoder refuses end the
 * content with UploadNotEncodedAsDeclared; a client that goes away ends it with an error
 * (UploadAborted in stageUpload). `stop` detaches the decoder (past a size limit, the rest is
 * not worth decoding) and drops what else arrives: the request itself is never destroyed, for
 * the reason stageUpload gives.
 */
export function decodeUpload(request: Readable, coding: keyof typeof DECODERS, maxBytes: number): { content: Readable; stop: () => void } {
  const decoder = DECODERS[coding]();
  const stop = () => {
    request.off('data', count);
    request.unpipe(decoder);
    request.resume();
    decoder.destroy();
  };
  const content = new PassThrough();
  let sent = 0;
  const count = (chunk: Buffer) => {
    sent += chunk.length;
    if (sent <= maxBytes) return;
    stop();
    content.destroy(new UploadTooLarge(maxBytes));
  };
  request.on('data', count); // before pipe's listener, so the chunk past the limit is never decoded
  decoder.on('error', (err) => {
    stop();
    content.destroy(err instanceof UploadAborted ? err : new UploadNotEncodedAsDeclared());
  });
  const aborted = () => {
    if (!request.readableEnded) decoder.destroy(new UploadAborted());
  };
  request.once('close', aborted).once('error', aborted);
  request.pipe(decoder).pipe(content);
  return { content, stop };
}

/**
 * Streams `source` into the new file `file` (created exclusively, synced to disk before this
 * resolves). Rejects with UploadTooLarge past `maxBytes` and UploadAborted when the client
 * goes away; on rejection the file is closed (the caller removes it).
 */
export function stageUpload(source: Readable, file: string, maxBytes: number): Promise<StagedUpload> {
  return new Promise<StagedUpload>((resolve, reject) => {
    if (source.readableEnded) {
      reject(new Error('the request body was already consumed (is a body parser reading /blobs?)'));
      return;
    }
    const hash = createHash('sha256');
    const out = createWriteStream(file, { flags: 'wx', flush: true });
    let size = 0;
    let failure: Error | undefined;

    const detach = () => {
      source.off('data', onData);
      source.off('end', onEnd);
      source.off('error', onSourceError);
      source.off('close', onSourceClose);
      out.off('drain', onDrain);
    };
    const fail = (err: Error) => {
      if (failure) return;
      failure = err;
      detach();
      source.on('error', () => undefined); // late socket errors must not crash the process
      source.resume(); // keep discarding whatever else arrives
      // Settle only once the descriptor is closed, so the caller's unlink cannot race the open.
      if (out.closed) reject(err);
      else out.once('close', () => reject(err)).destroy();
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) return fail(new UploadTooLarge(maxBytes));
      hash.update(chunk);
      if (!out.write(chunk)) source.pause();
    };
    const onDrain = () => source.resume();
    const onEnd = () => {
      detach();
      out.end();
    };
    const onSourceError = (err: unknown) => fail(err instanceof UploadNotEncodedAsDeclared || err instanceof UploadTooLarge ? err : new UploadAborted());
    const onSourceClose = () => {
      if (!source.readableEnded) fail(new UploadAborted());
    };

    out.on('drain', onDrain);
    out.once('error', (err) => fail(err));
    out.once('close', () => {
      if (!failure) resolve({ hash: hash.digest('hex'), size });
    });
    source.on('data', onData);
    source.once('end', onEnd);
    source.once('error', onSourceError);
    source.once('close', onSourceClose);
  });
}
