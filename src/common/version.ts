/**
 * The service's version, in one place: OpenAPI's `info.version` (CONTRACT) and the webhook
 * requests' `User-Agent`. package.json's `version` says the same (the OpenAPI test holds them together).
 */
export const SERVICE_VERSION = '4.2.0';
