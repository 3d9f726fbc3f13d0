import { chunkLockWaitMs } from './bulk-worker';

describe('chunkLockWaitMs', () => {
  it('ends a lock wait before the statement timeout would, so that it is told apart', () => {
    expect(chunkLockWaitMs(30_000)).toBe(5000);
    expect(chunkLockWaitMs(4000)).toBe(2000);
  });

  it('still bounds the wait with no statement timeout', () => {
    expect(chunkLockWaitMs(0)).toBe(5000);
  });
});
