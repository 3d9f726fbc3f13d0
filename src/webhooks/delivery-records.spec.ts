import { retryingRecord } from './delivery-records';

describe('delivery records: a statement while the database is away, or that lost a deadlock', () => {
  const away = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });

  it('is tried again while the database is away, and lands once it is back', async () => {
    let calls = 0;
    await retryingRecord(async () => {
      if (++calls < 3) throw away();
    }, [1, 1, 1]);
    expect(calls).toBe(3);
  });

  it('gives up after its last wait, with the error', async () => {
    let calls = 0;
    const failing = retryingRecord(async () => {
      calls++;
      throw away();
    }, [1, 1]);
    await expect(failing).rejects.toThrow('ECONNREFUSED');
    expect(calls).toBe(3);
  });

  it('is not tried again for an error of the statement itself', async () => {
    let calls = 0;
    const failing = retryingRecord(async () => {
      calls++;
      throw Object.assign(new Error('duplicate key value violates unique constraint'), { code: '23505' });
    }, [1, 1]);
    await expect(failing).rejects.toThrow('duplicate key');
    expect(calls).toBe(1);
  });

  it('is tried again after losing a deadlock (rolled back whole), and lands', async () => {
    let calls = 0;
    await retryingRecord(async () => {
      if (++calls < 3) throw Object.assign(new Error('query failed'), { driverError: Object.assign(new Error('deadlock detected'), { code: '40P01' }) });
    }, [60_000, 60_000, 60_000]);
    expect(calls).toBe(3);
  });
});
