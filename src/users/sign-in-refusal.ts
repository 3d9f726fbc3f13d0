/**
 * What a refused sign-in says when the email and password do not match (users.service.ts
 * `authenticate`), in one place: the pages that show it mark both fields as in error for it
 * (src/oidc/pages.ts), and only for it (a throttled sign-in is about waiting, not the fields).
 */
export const WRONG_PASSWORD = 'The email or the password is not right.';
