import { PinoLogger } from 'nestjs-pino';
import { Writable } from 'node:stream';
import { QueryFailedError } from 'typeorm';
import { createLogger, loggerParams, maskUrl, serializeError } from './request-logging';

describe('request logging', () => {
  it('logs a failed statement without its values or the detail that quotes them', () => {
    const driverError = Object.assign(new Error('duplicate key value violates unique constraint "users_email"'), {
      code: '23505',
      detail: 'Key (email)=(ann@example.com) already exists.',
    });
    const err = new QueryFailedError('INSERT INTO users (email, password) VALUES ($1, $2)', ['ann@example.com', 'scrypt$secret-hash'], driverError);
    const logged = JSON.stringify(serializeError(err));
    expect(logged).not.toContain('ann@example.com');
    expect(logged).not.toContain('scrypt$secret-hash');
    expect(serializeError(err)).toMatchObject({
      type: 'QueryFailedError',
      query: 'INSERT INTO users (email, password) VALUES ($1, $2)',
      code: '23505',
      driverError: { code: '23505', detail: '[redacted]' },
    });
    // The error itself is left as it was, for whoever handles it after the log.
    expect([err.parameters, (err.driverError as { detail: string }).detail]).toEqual([['ann@example.com', 'scrypt$secret-hash'], driverError.detail]);
  });

  it('logs a failed statement without its values through Nest\'s logger as the app wires it', () => {
    const lines: string[] = [];
    const destination = new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const logger = new PinoLogger(loggerParams(createLogger({ LOG_LEVEL: 'info' }, destination)));
    const driverError = Object.assign(new Error('canceling statement due to user request'), { code: '57014' });
    logger.warn({ err: new QueryFailedError('INSERT INTO items (properties) VALUES ($1)', ['{"title":"confidential"}'], driverError) }, 'dependency unavailable');
    expect(lines).toHaveLength(1);
    expect(lines[0]).not.toContain('confidential');
    expect(JSON.parse(lines[0])).toMatchObject({ msg: 'dependency unavailable', err: { type: 'QueryFailedError', parameters: '[redacted]', query: 'INSERT INTO items (properties) VALUES ($1)' } });
  });

  it('masks the user-info of an absolute-form request target', () => {
    expect(maskUrl('http://admin:S3CRET@127.0.0.1:3000/items?x=1')).toBe('http://[redacted]@127.0.0.1:3000/items?x=1');
    expect(maskUrl('http://user:pa%40ss@S3CRET@127.0.0.1/health')).toBe('http://[redacted]@127.0.0.1/health');
    expect(maskUrl('admin:S3CRET@127.0.0.1:22')).toBe('[redacted]@127.0.0.1:22');
    expect(maskUrl('/items/abc@def?x=1')).toBe('/items/abc@def?x=1');
  });
});
