/**
 * The operationIds of the routes Nest serves, which generated clients name their functions and
 * types after, so they stay the same when a controller is refactored: lowerCamelCase, a verb then
 * the resource (`createItem`, `listItems`, `rotateWebhookSecret`). The rule reads both off the
 * handler: the method name's first word is the verb (`remove` reads `delete`), the controller's
 * name the resource (plural after `list`), the rest of the method name follows. Where that reads
 * badly, or one handler serves two paths, the id is given below. The provider's own endpoints
 * (oidc/openapi-paths.ts) and the HEAD beside each GET (`<get id>Head`, openapi.ts) name theirs.
 */

/** Controllers whose name is not the resource their routes are about. */
const RESOURCES: Record<string, string> = {
  BulkController: 'BulkJobs',
  AuditController: 'AuditEvents',
};

/** Verbs that read better otherwise in an id. */
const VERBS: Record<string, string> = { remove: 'delete' };

/** By `Controller.method`, `[n]` for the nth path of a handler that serves several (as @nestjs/swagger numbers them). */
export const OPERATION_IDS: Record<string, string> = {
  'HealthController.health': 'getHealth',
  'OpenApiController.openapi': 'getOpenApiDocument',
  'OpenApiController.docs': 'getApiReference',
  'OpenApiController.asset': 'getApiReferenceAsset',
  'InteractionsController.authorizeByPost[0]': 'authorizeOAuth2ByPost',
  'InteractionsController.authorizeByPost[1]': 'authorizeByPost',
  'InteractionsController.logoutByPost': 'logoutByPost',
  'InteractionsController.signInForm': 'getSignInPage',
  'InteractionsController.signIn': 'signIn',
  'InteractionsController.selectAccount': 'selectAccount',
  'InteractionsController.consentForm': 'getConsentPage',
  'InteractionsController.decide[0]': 'decideConsent',
  'InteractionsController.decide[1]': 'decideConsentOAuth2',
  'DeviceController.page': 'getDevicePage',
  'DeviceController.consent': 'decideDeviceConsent',
  'UserinfoController.get[0]': 'getUserinfo',
  'UserinfoController.get[1]': 'getOAuth2Userinfo',
  'AccountController.signUpForm': 'getSignUpPage',
  'AccountController.signUp': 'signUp',
  'AccountController.grantsList': 'listGrants',
  'AccountController.grant': 'getGrant',
  'AccountController.remove': 'revokeGrant',
  'AccountController.revoke': 'revokeGrantByPost',
  'AccountController.sessions': 'listSessions',
  'AccountController.endSessions': 'endAllSessions',
  'AccountController.security': 'getSecurityPage',
  'AccountController.createKey': 'createAccountKey',
  'ItemsController.bulk': 'bulkWriteItems',
  'ItemsController.versions': 'listItemVersions',
  'ItemsController.metadata': 'getItemMetadata',
  'BulkController.submit': 'runBulkAction',
  'BlobsController.metadata': 'getBlobMetadata',
  'SearchController.find': 'searchItems',
  'WebhooksController.deliveries': 'listWebhookDeliveries',
  'ClientsController.listGrants': 'listClientGrants',
  'WebhooksController.delivery': 'getWebhookDelivery',
  'WebhooksController.retry': 'retryWebhookDelivery',
  'EventsController.open': 'streamEvents',
  'ConnectionsController.callback': 'completeConnection',
};

/** The id by the rule, for `controller` (a class name) and `method` (as @nestjs/swagger's operationIdFactory gets them). */
export function operationId(controller: string, method: string): string {
  const given = OPERATION_IDS[`${controller}.${method}`];
  if (given) return given;
  if (/\[\d+\]$/.test(method)) throw new Error(`${controller}.${method} serves several paths: give each its operationId in OPERATION_IDS`);
  const [, first, rest] = /^([a-z]+)(.*)$/.exec(method)!;
  const verb = VERBS[first] ?? first;
  const resources = RESOURCES[controller] ?? controller.replace(/Controller$/, '');
  return `${verb}${verb === 'list' ? resources : resources.replace(/s$/, '')}${rest}`;
}
