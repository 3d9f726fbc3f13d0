import { GuardedClient, poolGuards } from './pg-guards';

describe('poolGuards', () => {
  it('ends a session left idle in a transaction after twice the statement timeout', () => {
    expect(poolGuards(30_000)).toMatchObject({ statement_timeout: 30_000, query_timeout: 35_000, idle_in_transaction_session_timeout: 60_000 });
  });

  it('sets no limit at all with no statement timeout', () => {
    const guards = poolGuards(0);
    expect(guards).not.toHaveProperty('statement_timeout');
    expect(guards).not.toHaveProperty('idle_in_transaction_session_timeout');
  });
});

describe('GuardedClient', () => {
  it('survives its connection failing while no user listens (between the pool and a promise-awaiting user)', () => {
    const client = new GuardedClient();
    expect(() => client.emit('error', Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }))).not.toThrow();
  });
});
