/** The SPEC's paths of the provider's own endpoints (oidc-provider.factory.ts configures them, oidc-mount.ts mounts them). */
export const OIDC_ROUTES = {
  authorization: '/auth/authorize',
  token: '/auth/oauth2/token',
  userinfo: '/auth/oauth2/userinfo',
  revocation: '/auth/oauth2/revoke',
  introspection: '/auth/oauth2/introspect',
  registration: '/auth/oauth2/register',
  jwks: '/auth/jwks',
  end_session: '/auth/logout',
  device_authorization: '/auth/device',
  // The provider's own user-code pages stay unreachable: GET /auth/device is the service's (device.controller.ts).
  code_verification: '/auth/device/verify',
} as const;
