import { parseRotateArgs, UsageError } from './rotate-signing-key';

describe('oidc:rotate-key arguments', () => {
  it('takes none, or one --retire-older-than=<days>', () => {
    expect(parseRotateArgs([])).toEqual({});
    expect(parseRotateArgs(['--retire-older-than=2'])).toEqual({ retireOlderThanDays: 2 });
    expect(parseRotateArgs(['--retire-older-than=36500'])).toEqual({ retireOlderThanDays: 36_500 });
  });

  // Each of these used to add a key, retire nothing and exit 0.
  it.each([
    [['--retire-older-than=abc'], '--retire-older-than=abc'],
    [['--retire', '1'], '--retire'],
    [['--retire-older-than', '2'], '--retire-older-than'],
    [['--retire-older-than=0'], '--retire-older-than=0'],
    [['--retire-older-than=-3'], '--retire-older-than=-3'],
    [['--retire-older-than=1.5'], '--retire-older-than=1.5'],
    [['--retire-older-than=36501'], '--retire-older-than=36501'],
    [['--retire-older-than=2', '--dry-run'], '--dry-run'],
    [['2'], '2'],
  ])('refuses %p, naming %p', (args, named) => {
    expect(() => parseRotateArgs(args)).toThrow(UsageError);
    expect(() => parseRotateArgs(args)).toThrow(`unexpected argument ${JSON.stringify(named)}; nothing was rotated; usage: npm run oidc:rotate-key`);
  });
});
