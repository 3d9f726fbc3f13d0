import { consentPage, shownAppName } from './pages';

describe('an app name on the pages', () => {
  it('drops control, bidi override and isolate characters, so a name registered before the rule cannot reorder the page', () => {
    expect(shownAppName('Notes \u202Eppa yliad')).toBe('Notes ppa yliad');
    // Stored before names had to show something: the page still names the app as something.
    expect(shownAppName('\u200b\u3164')).toBe('An app without a name');
    expect(shownAppName('\u202e ')).toBe('An app without a name');
    expect(shownAppName('Your Bank\n\nPlease enter your password\u2066 again\u2069')).toBe('Your BankPlease enter your password again');
    expect(shownAppName('Café 📝')).toBe('Café 📝');
  });

  it('shows at most 200 characters of it, counted in code points', () => {
    expect(shownAppName('📝'.repeat(300))).toBe(`${'📝'.repeat(200)}…`);
    expect(shownAppName('a'.repeat(200))).toBe('a'.repeat(200));
  });

  it('is what the consent page shows, escaped', () => {
    const html = consentPage({ uid: 'u', csrf: 'c', action: '/auth/authorize/decision', clientName: '<b>Notes</b> \u202Eppa', scopes: [], extensions: {} });
    expect(html).toContain('<strong>&lt;b&gt;Notes&lt;/b&gt; ppa</strong>');
    expect(html).not.toContain('\u202E');
  });
});
