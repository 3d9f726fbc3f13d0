/** The stored bulk job row (migration 1732300001100) and its public shape (SPEC 2.4). */
import type { Audience } from '../events/event-catalogue';
import { BulkAction, BulkItemError, BulkRequest, FINAL_STATUSES, JobStatus } from './bulk-actions';
import type { BulkJobDto } from './bulk.dto';

/** A job as the API, its events and its visibility read it: none of what only its worker reads. */
export interface JobRow {
  tenant_id: string;
  id: string;
  action: BulkAction;
  credential_id: string;
  /** `tokenScopesOf` of the starter: null for an API key. */
  job_scopes: string[] | null;
  status: JobStatus;
  matched: number;
  processed: number;
  succeeded: number;
  errored: number;
  errors: BulkItemError[];
  blob_hashes_referenced: number;
  cancel_requested: boolean;
  error: string | null;
  /** Null for jobs submitted before it was kept (migration 1732300006100). */
  request: BulkRequest | null;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
}

/** The token scopes of the job's starter (`tokenScopesOf` of its stored principal) in SQL, as text[]: null for an API key. */
export const JOB_TOKEN_SCOPES_SQL = `(CASE WHEN principal->>'kind' = 'oauth'
  THEN ARRAY(SELECT jsonb_array_elements_text(COALESCE(principal->'scopes', '[]'::jsonb))) END)`;

/**
 * The columns of a JobRow. Not the worker's: the match set (`item_ids`, up to 50,000 ids), the
 * `spec` (its patch up to a whole JSON body) and the starter's whole `principal`.
 */
export const JOB_COLUMNS = `tenant_id, id, action, credential_id, ${JOB_TOKEN_SCOPES_SQL} AS job_scopes, status, matched, processed, succeeded, errored, errors,
  cardinality(blob_hashes) AS blob_hashes_referenced, cancel_requested, error, request, created_at, started_at, finished_at`;

/**
 * What a job lets go of as it ends (SET clauses of the statement that ends it), since only a
 * running job's worker reads it: the match set, the `spec`, and of the starter's principal all
 * but what its visibility still needs (`kind` and `scopes`, read by JOB_TOKEN_SCOPES_SQL); the
 * events of its end are recorded in that statement's transaction, with the audience from the
 * row as it ends and the actor given by the caller. Migration 1732300004200 did the same to the
 * jobs that had ended before it.
 */
export const ENDED_JOB_SET = `item_ids = '{}', spec = NULL,
  principal = jsonb_strip_nulls(jsonb_build_object('kind', principal->'kind', 'scopes', principal->'scopes'))`;

/** Who receives the events of the job's end (event-catalogue.ts `mayReceive`): its credential, within its token's scopes. */
export function jobAudience(r: JobRow): Audience {
  return { job_credential: r.credential_id, job_scopes: r.job_scopes };
}

/** The API's job: `result` once it has ended, built from the counters the chunks kept. */
export function toJob(r: JobRow): BulkJobDto {
  const ended = FINAL_STATUSES.includes(r.status);
  return {
    id: r.id,
    action: r.action,
    ...(r.request ? { request: r.request } : {}),
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
