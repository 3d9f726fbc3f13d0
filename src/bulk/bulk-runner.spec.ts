import { lockWaitMs } from './bulk-runner';

describe('lockWaitMs', () => {
  it('ends a lock wait before the statement timeout would, so that it is told apart', () => {
    expect(lockWaitMs(30_000)).toBe(5000);
    expect(lockWaitMs(4000)).toBe(2000);
  });

  it('still bounds the wait with no statement timeout', () => {
    expect(lockWaitMs(0)).toBe(5000);
  });
});
