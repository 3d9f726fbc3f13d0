import { hashPassword, verifyAgainstNothing, verifyPassword } from './password';

describe('password hashing', () => {
  it('verifies the right password and refuses others, with a fresh salt per hash', async () => {
    const a = await hashPassword('correct horse battery staple');
    const b = await hashPassword('correct horse battery staple');
    expect(a).toMatch(/^scrypt\$32768\$8\$1\$[\w-]{22}\$[\w-]{43}$/);
    expect(a).not.toBe(b);
    expect(await verifyPassword('correct horse battery staple', a)).toBe(true);
    expect(await verifyPassword('correct horse battery stapl', a)).toBe(false);
    expect(await verifyPassword('', a)).toBe(false);
  });

  it('treats composed and decomposed Unicode as the same password', async () => {
    const stored = await hashPassword('caf\u00e9-password');
    expect(await verifyPassword('cafe\u0301-password', stored)).toBe(true);
  });

  it('refuses a malformed stored hash and answers false for no account', async () => {
    expect(await verifyPassword('x', 'plain')).toBe(false);
    expect(await verifyAgainstNothing('x')).toBe(false);
  });
});
