/** Every migration, in order. Listed explicitly so the same list serves src (tests) and dist. */
import { TenantsAndKeys1732300000000 } from './1732300000000-tenants-and-keys';
import { TypesAndItems1732300000100 } from './1732300000100-types-and-items';
import { Edges1732300000200 } from './1732300000200-edges';
import { Blobs1732300000300 } from './1732300000300-blobs';
import { Idempotency1732300000400 } from './1732300000400-idempotency';
import { Search1732300000500 } from './1732300000500-search';
import { SearchStorage1732300000600 } from './1732300000600-search-storage';
import { SearchCommonGrams1732300000700 } from './1732300000700-search-common-grams';
import { SearchTenantScopedIndex1732300000800 } from './1732300000800-search-tenant-scoped-index';
import { SearchFrequentWordGrams1732300000900 } from './1732300000900-search-frequent-word-grams';
import { EventsAndWebhooks1732300001000 } from './1732300001000-events-and-webhooks';
import { BulkJobs1732300001100 } from './1732300001100-bulk-jobs';
import { MillisecondListTimestamps1732300001200 } from './1732300001200-millisecond-list-timestamps';
import { Users1732300001300 } from './1732300001300-users';
import { Oidc1732300001400 } from './1732300001400-oidc';
import { OauthDevicePolls1732300001500 } from './1732300001500-oauth-device-polls';
import { Audit1732300001600 } from './1732300001600-audit';
import { Integrations1732300001700 } from './1732300001700-integrations';
import { Connections1732300001800 } from './1732300001800-connections';
import { EventRelayLease1732300001900 } from './1732300001900-event-relay-lease';
import { WebhookCredentialScopes1732300002000 } from './1732300002000-webhook-credential-scopes';
import { OauthSecretsAtRest1732300002100 } from './1732300002100-oauth-secrets-at-rest';
import { EventPublishOrder1732300002200 } from './1732300002200-event-publish-order';
import { SearchTagsFirst1732300002300 } from './1732300002300-search-tags-first';
import { SubtypesKeepParentRules1732300002400 } from './1732300002400-subtypes-keep-parent-rules';
import { ItemsTrashedFrom1732300002500 } from './1732300002500-items-trashed-from';
import { SearchWordBreaks1732300002600 } from './1732300002600-search-word-breaks';
import { IdempotencyApplied1732300002700 } from './1732300002700-idempotency-applied';
import { EventsFirstPublishedSeq1732300002800 } from './1732300002800-events-first-published-seq';
import { IdempotencyLocation1732300002900 } from './1732300002900-idempotency-location';
import { RetentionAndAccountIndexes1732300003000 } from './1732300003000-retention-and-account-indexes';
import { OpenidNeverRefused1732300003100 } from './1732300003100-openid-never-refused';
import { KeysCreatedByUser1732300003200 } from './1732300003200-keys-created-by-user';
import { WebhooksUser1732300003300 } from './1732300003300-webhooks-user';
import { SubtypesKeepUnsearchable1732300003400 } from './1732300003400-subtypes-keep-unsearchable';
import { ConnectionRefreshClaim1732300003500 } from './1732300003500-connection-refresh-claim';
import { IdempotencyClaimLease1732300003600 } from './1732300003600-idempotency-claim-lease';
import { DeliveryBodiesFromEvents1732300003700 } from './1732300003700-delivery-bodies-from-events';
import { DeliveryForcedAttempts1732300003800 } from './1732300003800-delivery-forced-attempts';
import { WebhookSecretRotation1732300003900 } from './1732300003900-webhook-secret-rotation';
import { SubtypesKeepUnsearchableAdded1732300004100 } from './1732300004100-subtypes-keep-unsearchable-added';
import { BulkJobRetention1732300004200 } from './1732300004200-bulk-job-retention';
import { DeliveriesDueByWebhook1732300004300 } from './1732300004300-deliveries-due-by-webhook';
import { TenantScopedListIndexes1732300004400 } from './1732300004400-tenant-scoped-list-indexes';
import { SearchFunctionsRestorable1732300004500 } from './1732300004500-search-functions-restorable';
import { TenantsByCreated1732300004600 } from './1732300004600-tenants-by-created';
import { ItemsByTimestamp1732300004700 } from './1732300004700-items-by-timestamp';
import { UsersUpdatedAt1732300004800 } from './1732300004800-users-updated-at';
import { TenantsMillisecondCreated1732300004900 } from './1732300004900-tenants-millisecond-created';
import { OauthClientsByTenant1732300005000 } from './1732300005000-oauth-clients-by-tenant';
import { TenantDeletion1732300005100 } from './1732300005100-tenant-deletion';
import { BlockedClients1732300005200 } from './1732300005200-blocked-clients';
import { OauthRowsByClient1732300005300 } from './1732300005300-oauth-rows-by-client';
import { AuditByUser1732300005400 } from './1732300005400-audit-by-user';
import { AuditTransactionOrder1732300005500 } from './1732300005500-audit-transaction-order';
import { UsersEmailVerified1732300005600 } from './1732300005600-users-email-verified';
import { KeysExpiryLastUsed1732300005700 } from './1732300005700-keys-expiry-last-used';
import { TypeChangeSearchReindexSkippable1732300005800 } from './1732300005800-type-change-search-reindex-skippable';
import { UsersDisabled1732300005900 } from './1732300005900-users-disabled';
import { BulkJobRequest1732300006100 } from './1732300006100-bulk-job-request';
import { BlobsByCreated1732300006200 } from './1732300006200-blobs-by-created';
import { AccountListsByUser1732300006400 } from './1732300006400-account-lists-by-user';
import { ItemsByUpdated1732300006500 } from './1732300006500-items-by-updated';
import { UsersDisabledReason1732300006600 } from './1732300006600-users-disabled-reason';
import { UsersDisabledUntil1732300006800 } from './1732300006800-users-disabled-until';
import { ItemsByTimestampAndId1732300006900 } from './1732300006900-items-by-timestamp-and-id';
import { EdgesByCreated1732300007000 } from './1732300007000-edges-by-created';
import { GrantsByClient1732300007100 } from './1732300007100-grants-by-client';

export const migrations = [
  TenantsAndKeys1732300000000,
  TypesAndItems1732300000100,
  Edges1732300000200,
  Blobs1732300000300,
  Idempotency1732300000400,
  Search1732300000500,
  SearchStorage1732300000600,
  SearchCommonGrams1732300000700,
  SearchTenantScopedIndex1732300000800,
  SearchFrequentWordGrams1732300000900,
  EventsAndWebhooks1732300001000,
  BulkJobs1732300001100,
  MillisecondListTimestamps1732300001200,
  Users1732300001300,
  Oidc1732300001400,
  OauthDevicePolls1732300001500,
  Audit1732300001600,
  Integrations1732300001700,
  Connections1732300001800,
  EventRelayLease1732300001900,
  WebhookCredentialScopes1732300002000,
  OauthSecretsAtRest1732300002100,
  EventPublishOrder1732300002200,
  SearchTagsFirst1732300002300,
  SubtypesKeepParentRules1732300002400,
  ItemsTrashedFrom1732300002500,
  SearchWordBreaks1732300002600,
  IdempotencyApplied1732300002700,
  EventsFirstPublishedSeq1732300002800,
  IdempotencyLocation1732300002900,
  RetentionAndAccountIndexes1732300003000,
  OpenidNeverRefused1732300003100,
  KeysCreatedByUser1732300003200,
  WebhooksUser1732300003300,
  SubtypesKeepUnsearchable1732300003400,
  ConnectionRefreshClaim1732300003500,
  IdempotencyClaimLease1732300003600,
  DeliveryBodiesFromEvents1732300003700,
  DeliveryForcedAttempts1732300003800,
  WebhookSecretRotation1732300003900,
  SubtypesKeepUnsearchableAdded1732300004100,
  BulkJobRetention1732300004200,
  DeliveriesDueByWebhook1732300004300,
  TenantScopedListIndexes1732300004400,
  SearchFunctionsRestorable1732300004500,
  TenantsByCreated1732300004600,
  ItemsByTimestamp1732300004700,
  UsersUpdatedAt1732300004800,
  TenantsMillisecondCreated1732300004900,
  OauthClientsByTenant1732300005000,
  TenantDeletion1732300005100,
  BlockedClients1732300005200,
  OauthRowsByClient1732300005300,
  AuditByUser1732300005400,
  AuditTransactionOrder1732300005500,
  UsersEmailVerified1732300005600,
  KeysExpiryLastUsed1732300005700,
  TypeChangeSearchReindexSkippable1732300005800,
  UsersDisabled1732300005900,
  BulkJobRequest1732300006100,
  BlobsByCreated1732300006200,
  AccountListsByUser1732300006400,
  ItemsByUpdated1732300006500,
  UsersDisabledReason1732300006600,
  UsersDisabledUntil1732300006800,
  ItemsByTimestampAndId1732300006900,
  EdgesByCreated1732300007000,
  GrantsByClient1732300007100,
];
