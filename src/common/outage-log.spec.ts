import { OutageLog } from './outage-log';

describe('OutageLog', () => {
  const setup = () => {
    const lines: Array<[string, Record<string, unknown>, string]> = [];
    let clock = 0;
    const log = new OutageLog({ warn: (fields, msg) => lines.push(['warn', fields, msg]), log: (fields, msg) => lines.push(['info', fields, msg]) }, 'relay pass failed', 60_000, () => clock);
    return { lines, log, at: (ms: number) => (clock = ms) };
  };

  it('logs the first failure, sums the repeats up once a minute, and logs the recovery once', () => {
    const { lines, log, at } = setup();
    const err = new Error('Redis is not connected');
    for (let ms = 0; ms < 150_000; ms += 100) {
      at(ms);
      log.failed(err);
    }
    at(150_000);
    log.succeeded();
    log.succeeded();
    expect(lines.map(([level, fields, msg]) => [level, msg, fields.repeated])).toEqual([
      ['warn', 'relay pass failed', undefined],
      ['warn', 'relay pass failed (still failing)', 600],
      ['warn', 'relay pass failed (still failing)', 600],
      ['info', 'relay pass failed: recovered', 1499],
    ]);
    expect(lines[0][1].err).toBe(err);
    expect(lines[3][1].failing_ms).toBe(150_000);
  });

  it('starts afresh after a recovery', () => {
    const { lines, log } = setup();
    log.failed(new Error('a'));
    log.succeeded();
    log.failed(new Error('b'));
    expect(lines.map(([level, , msg]) => `${level} ${msg}`)).toEqual(['warn relay pass failed', 'info relay pass failed: recovered', 'warn relay pass failed']);
  });
});
