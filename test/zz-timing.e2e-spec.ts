import { startApp } from './support/app';
it('times', async () => {
  for (let i = 0; i < 3; i++) {
    const t0 = Date.now();
    const t = await startApp();
    const t1 = Date.now();
    await t.close();
    console.log('start', t1 - t0, 'close', Date.now() - t1);
  }
});
