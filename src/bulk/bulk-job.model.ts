/** The stored bulk job row (migration 1732300001100) and its public shape (SPEC 2.4). */
import type { Principal } from '../auth/principal';
import type { Audience } from '../events/event-catalogue';
import { tokenScopesOf } from '../oidc/scopes';
import { BulkAction, BulkItemError, BulkSpec, FINAL_STATUSES, JobStatus } from './bulk-actions';
import type { BulkJobDto } from './bulk.dto';

export interface JobRow {
  tenant_id: string;
  id: string;
  action: BulkAction;
  spec: BulkSpec;
  credential_id: string;
  principal: Principal;
  status: JobStatus;
  matched: number;
  processed: number;
  succeeded: number;
  errored: number;
  errors: BulkItemError[];
  blob_hashes_referenced: number;
  cancel_requested: boolean;
  error: string | null;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
}

/** Every column but the match set (`item_ids`, up to 50,000 ids), which only the worker reads. */
export const JOB_COLUMNS = `tenant_id, id, action, spec, credential_id, principal, status, matched, processed, succeeded, errored, errors,
  cardinality(blob_hashes) AS blob_hashes_referenced, cancel_requested, error, created_at, started_at, finished_at`;

/** The token scopes of the job's starter (`tokenScopesOf` of its stored principal) in SQL, as text[]: null for an API key. */
export const JOB_TOKEN_SCOPES_SQL = `(CASE WHEN principal->>'kind' = 'oauth'
  THEN ARRAY(SELECT jsonb_array_elements_text(COALESCE(principal->'scopes', '[]'::jsonb))) END)`;

/** Who receives the events of the job's end (event-catalogue.ts `mayReceive`): its credential, within its token's scopes. */
export function jobAudience(r: JobRow): Audience {
  return { job_credential: r.credential_id, job_scopes: tokenScopesOf(r.principal) };
}

/** The API's job: `result` once it has ended, built from the counters the chunks kept. */
export function toJob(r: JobRow): BulkJobDto {
  const ended = FINAL_STATUSES.includes(r.status);
  return {
    id: r.id,
    action: r.action,
    status: r.status,
    matched: r.matched,
    processed: r.processed,
    succeeded: r.succeeded,
    errored: r.errored,
    cancel_requested: r.cancel_requested,
    created_at: r.created_at.toISOString(),
    ...(r.started_at ? { started_at: r.started_at.toISOString() } : {}),
    ...(r.finished_at ? { finished_at: r.finished_at.toISOString() } : {}),
    ...(r.error ? { error: r.error } : {}),
    ...(ended
      ? {
          result: {
            action: r.action,
            matched: r.matched,
            succeeded: r.succeeded,
            errored: r.errored,
            dry_run: false,
            errors: r.errors,
            ...(r.action === 'purge' ? { blob_hashes_referenced: r.blob_hashes_referenced } : {}),
          },
        }
      : {}),
  };
}
