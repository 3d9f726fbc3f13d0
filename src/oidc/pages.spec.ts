import { WRONG_PASSWORD } from '../users/sign-in-refusal';
import {
  consentPage,
  createdKeyPage,
  deviceCodePage,
  deviceConsentPage,
  errorPage,
  grantsPage,
  messagePage,
  noticeOf,
  otherWorkspacePage,
  providerErrorPage,
  rateLimitedPage,
  securityPage,
  sessionsPage,
  shownAppName,
  shownTime,
  signInPage,
  signUpPage,
} from './pages';

/** The opening tag of the element with id `id`. */
const tagOf = (html: string, id: string) => new RegExp(`<[a-z]+ [^>]*id="${id}"[^>]*>`).exec(html)?.[0] ?? '';

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

describe('an app that registered itself', () => {
  const consent = { uid: 'u', csrf: 'c', action: '/auth/authorize/decision', clientName: 'Acme Notes', scopes: ['openid'], extensions: {} };
  const device = { userCode: 'ABC-DEFG', csrf: 'c', clientName: 'Acme Notes', scopes: ['openid'], extensions: {} };

  it('is said to name itself on both consent pages, with the host the answer goes to where there is one', () => {
    const html = consentPage({ ...consent, selfRegistered: { redirectUri: 'https://evil.example:8443/cb?x=<b>' } });
    expect(html).toContain('This app registered itself');
    expect(html).toContain('Your answer goes to <strong>evil.example:8443</strong>');
    expect(consentPage({ ...consent, selfRegistered: { redirectUri: 'com.example.app:/cb' } })).toContain('<strong>com.example.app:</strong>');
    const onDevice = deviceConsentPage({ ...device, selfRegistered: {} });
    expect(onDevice).toContain('This app registered itself');
    expect(onDevice).not.toContain('Your answer goes to');
  });

  it('is not said of an app a tenant\'s admin registered', () => {
    expect(consentPage(consent)).not.toContain('registered itself');
    expect(deviceConsentPage(device)).not.toContain('registered itself');
  });
});

describe('a form drawn again after a problem', () => {
  it('marks the sign-in fields a wrong password is about, describes them by the message, focuses the first, and says so in the title', () => {
    const html = signInPage({ csrf: 'c', error: WRONG_PASSWORD, email: 'ann@example.com' });
    expect(html).toContain('<title>Error: Sign in</title>');
    expect(html).toContain(`<p class="error" id="form-error">${WRONG_PASSWORD}</p>`);
    expect(tagOf(html, 'email')).toContain(' aria-invalid="true" aria-describedby="form-error" autofocus');
    expect(tagOf(html, 'password')).toContain(' aria-invalid="true" aria-describedby="form-error"');
    expect(tagOf(html, 'password')).not.toContain('autofocus');
    expect(signInPage({ csrf: 'c' })).toContain('<title>Sign in</title>');
    expect(signInPage({ csrf: 'c' })).not.toMatch(/aria-invalid|autofocus/);
  });

  it('focuses the message, not a field, when the refusal is about neither field (a throttled sign-in)', () => {
    const html = signInPage({ csrf: 'c', error: 'Too many failed sign-ins for this account; try again in 5 minutes.' });
    expect(html).toContain('<title>Error: Sign in</title>');
    expect(tagOf(html, 'form-error')).toBe('<p class="error" id="form-error" tabindex="-1" autofocus>');
    expect(html).not.toMatch(/aria-invalid/);
  });

  it('says each sign-up problem at its field, all at once, the first field focused', () => {
    const html = signUpPage({ csrf: 'c', problems: [{ text: 'Enter your name.', fields: ['name'] }, { text: 'Give a valid email address.', fields: ['email'] }] });
    expect(html).toContain('<title>Error: Create an account</title>');
    expect(html).toContain('<label for="name">Name</label><p class="error" id="name-error">Enter your name.</p><input id="name"');
    expect(html).toContain('<label for="email">Email</label><p class="error" id="email-error">Give a valid email address.</p><input id="email"');
    expect(tagOf(html, 'name')).toContain('autocomplete="name"');
    expect(tagOf(html, 'name')).toContain('aria-invalid="true" aria-describedby="name-error" autofocus');
    expect(tagOf(html, 'email')).toContain('aria-invalid="true" aria-describedby="email-error"');
    expect(tagOf(html, 'email')).not.toContain('autofocus');
    expect(tagOf(html, 'password')).not.toContain('aria-invalid');
  });

  it('marks the device code field when the code is refused', () => {
    const html = deviceCodePage({ error: 'That code is not valid.', code: 'ab"c-123' });
    expect(html).toContain('<title>Error: Connect a device</title>');
    expect(tagOf(html, 'user_code')).toContain('aria-invalid="true" aria-describedby="user_code-error" autofocus');
    // The refused code stays in the box, to correct rather than type again.
    expect(tagOf(html, 'user_code')).toContain('value="ab&quot;c-123"');
  });
});

describe('the pages\' other wording', () => {
  it('shows a moment readably in UTC, in a <time> holding the ISO form', () => {
    expect(shownTime('2026-11-27T07:09:46.000Z')).toBe('<time datetime="2026-11-27T07:09:46.000Z">27 Nov 2026, 07:09 UTC</time>');
    expect(shownTime('not a date <b>')).toBe('not a date &lt;b&gt;');
    const html = grantsPage({ csrf: 'c', grants: [{ id: 'g', client_name: 'Notes', scope: 'openid', created_at: '2026-01-02T03:04:05.000Z' }] });
    expect(html).toContain('since <time datetime="2026-01-02T03:04:05.000Z">2 Jan 2026, 03:04 UTC</time>');
  });

  it('shows only its fixed confirmations, by code', () => {
    expect(noticeOf('revoked', ['revoked'])).toBe('revoked');
    // Only the notices of the page showing it: a link cannot make the grants page say "signed out".
    expect(noticeOf('signed-out', ['revoked'])).toBeUndefined();
    for (const code of ['toString', '__proto__', '<b>x</b>', undefined, ['revoked']]) expect(noticeOf(code, ['revoked', 'signed-out'])).toBeUndefined();
    expect(grantsPage({ csrf: 'c', grants: [], notice: 'revoked' })).toContain('<p class="notice" role="status">Access revoked');
  });

  it('tells the user in plain words what a provider error means for them, keeping the detail for the app\'s makers', () => {
    const html = providerErrorPage('invalid_request', "missing required parameter 'client_id'");
    expect(html).toContain('The app that sent you here made a mistake in its request');
    expect(html).toContain('<code>missing required parameter &#39;client_id&#39; (invalid_request)</code>');
  });

  it('titles every error page as one, as the forms drawn again are', () => {
    expect(errorPage('Form expired', 'x')).toContain('<title>Error: Form expired</title>');
    expect(otherWorkspacePage({ clientName: 'Notes', outcome: 'x' })).toContain('<title>Error: Not available</title>');
    expect(messagePage('Device connected', 'x')).toContain('<title>Device connected</title>');
  });

  it('puts the account menu before the main content, marking the page it is on, and names the app on each revoke button', () => {
    const html = grantsPage({ csrf: 'c', grants: [{ id: 'g', client_name: 'Notes', scope: 'openid', created_at: '2026-01-02T03:04:05.000Z' }] });
    expect(html.indexOf('<nav')).toBeLessThan(html.indexOf('<main>'));
    expect(html).toContain('<a href="/auth/grants" aria-current="page">Connected apps</a><span aria-hidden="true"> · </span><a href="/auth/sessions">');
    expect(html).toContain('<button type="submit" aria-label="Revoke access for Notes">Revoke access</button>');
    expect(sessionsPage({ csrf: 'c', sessions: [] })).toContain('<a href="/auth/sessions" aria-current="page">');
  });

  it('links a list page to its next page, escaped, only when there is one', () => {
    const grant = { id: 'g', client_name: 'Notes', scope: 'openid', created_at: '2026-01-02T03:04:05.000Z' };
    expect(grantsPage({ csrf: 'c', grants: [grant], next: '/auth/grants?limit=1&cursor=a"b' })).toContain('<p><a href="/auth/grants?limit=1&amp;cursor=a&quot;b">Older connected apps</a></p>');
    expect(grantsPage({ csrf: 'c', grants: [grant] })).not.toContain('Older');
    const session = { signed_in_at: '2026-01-02T03:04:05.000Z', expires_at: null };
    expect(sessionsPage({ csrf: 'c', sessions: [session], next: '/auth/sessions?cursor=x' })).toContain('<p><a href="/auth/sessions?cursor=x">Older sessions</a></p>');
  });

  it('draws the key form again with what was sent and its expiry\'s problem at the field, and says when a new key stops working', () => {
    const problems = [{ text: 'The expiry must be in the future.', fields: ['expires_at'] }];
    const html = securityPage({ email: 'a@b.example', events: [], keyForm: { csrf: 'c', nonce: 'n', label: 'ci "key"', expires_at: '2020-01-01T00:00', problems } });
    expect(html).toContain('<title>Error: Security</title>');
    expect(html).toContain('<input id="label" name="label" value="ci &quot;key&quot;" maxlength="200">');
    expect(html).toContain(
      '<p class="error" id="expires_at-error">The expiry must be in the future.</p><input id="expires_at" name="expires_at" type="datetime-local" value="2020-01-01T00:00" aria-invalid="true" aria-describedby="expires_at-error" autofocus>',
    );
    expect(securityPage({ email: 'a@b.example', events: [], keyForm: { csrf: 'c', nonce: 'n' } })).toContain('<title>Security</title>');
    expect(createdKeyPage({ key: 'k', label: 'l', expiresAt: '2026-12-01T10:00:00.000Z' })).toContain('It stops working <time datetime="2026-12-01T10:00:00.000Z">1 Dec 2026, 10:00 UTC</time>.');
    expect(createdKeyPage({ key: 'k', label: 'l', expiresAt: null })).toContain('It does not expire.');
  });

  it('says when to try again on a page refused by the rate limit', () => {
    const html = rateLimitedPage(37, true);
    expect(html).toContain('<title>Error: Too many requests</title>');
    expect(html).toContain('This form was not sent');
    expect(html).toContain('Wait 37 seconds, then try again.');
  });
});
