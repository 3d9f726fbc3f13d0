/**
 * Owns the integration manifest registry (SPEC 2.6, 4.4): registration by the root tenant's
 * admins, validated against the manifest schema (manifest-schema.ts) with a generated summary;
 * listing and lookup for every credential, so that an install's consent shows the real scopes.
 */
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import type { Principal } from '../auth/principal';
import { ApiError } from '../common/api-error';
import { isId, newId } from '../common/ids';
import { decodeCursor, pageOf } from '../common/pagination';
import { validationError } from '../common/validation';
import { isUniqueViolation } from '../common/unavailable';
import { IntegrationList, IntegrationRecord, ListIntegrationsQuery } from './integrations.dto';
import { Manifest, manifestIssues, summarize } from './manifest-schema';

interface IntegrationRow {
  id: string;
  manifest_name: string;
  manifest_version: string;
  publisher: string;
  direction: string;
  runtime_compatibility: string[];
  manifest: Record<string, unknown>;
  summary: string;
  registered_at: Date;
}

const COLUMNS = 'id, manifest_name, manifest_version, publisher, direction, runtime_compatibility, manifest, summary, registered_at';
const notFound = () => ApiError.notFound('integration_not_found', 'No such integration');
const toRecord = (r: IntegrationRow): IntegrationRecord => ({ ...r, registered_at: r.registered_at.toISOString() });

@Injectable()
export class IntegrationsService {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  async register(p: Principal, manifest: Record<string, unknown>): Promise<IntegrationRecord> {
    const issues = manifestIssues(manifest);
    if (issues.length) throw validationError(issues, 'The manifest is not valid');
    const m = manifest as unknown as Manifest;
    try {
      // In a transaction, which marks an Idempotency-Key applied as it commits (claim-applied.ts).
      const [row]: IntegrationRow[] = await this.db.transaction((tx) =>
        tx.query(
          `INSERT INTO integrations (id, manifest_name, manifest_version, publisher, direction, runtime_compatibility, manifest, summary, registered_by)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING ${COLUMNS}`,
          [newId(), m.name, m.version, m.publisher, m.direction, m.runtime_compatibility, manifest, summarize(m), p.credentialId],
        ),
      );
      return toRecord(row);
    } catch (err) {
      if (isUniqueViolation(err)) {
        throw ApiError.conflict('conflict', `${m.name} ${m.version} is already registered; register a new version`, { name: m.name, version: m.version });
      }
      throw err;
    }
  }

  async list(q: ListIntegrationsQuery): Promise<IntegrationList> {
    const limit = q.limit ?? 50;
    const after = decodeCursor(q.cursor, 'integrations');
    const rows: IntegrationRow[] = await this.db.query(
      `SELECT ${COLUMNS} FROM integrations
        WHERE ($1::text IS NULL OR manifest_name = $1) AND ($2::timestamptz IS NULL OR (registered_at, id) < ($2, $3::uuid))
        ORDER BY registered_at DESC, id DESC LIMIT $4`,
      [q.name ?? null, after?.createdAt ?? null, after?.id ?? null, limit + 1],
    );
    const { page, next_cursor } = pageOf(rows, limit, (r) => r.registered_at, 'integrations');
    return { integrations: page.map(toRecord), next_cursor };
  }

  /**
   * The client id of the newest registered version of `name` with one and this token_url, for
   * connections made under a version stored without one (ConnectionsService.refreshClientId).
   */
  async newestClientId(name: string, tokenUrl: string): Promise<string | undefined> {
    const [row]: Array<{ client_id: string }> = await this.db.query(
      `SELECT manifest #>> '{oauth,client_id}' AS client_id FROM integrations
        WHERE manifest_name = $1 AND manifest #>> '{oauth,token_url}' = $2 AND manifest #>> '{oauth,client_id}' <> ''
        ORDER BY registered_at DESC, id DESC LIMIT 1`,
      [name, tokenUrl],
    );
    return row?.client_id;
  }

  /** SPEC 4.4 answers only 200, 401 and 404 here: an id that cannot exist is not found either. */
  async get(id: string): Promise<IntegrationRecord> {
    if (!isId(id)) throw notFound();
    const [row]: IntegrationRow[] = await this.db.query(`SELECT ${COLUMNS} FROM integrations WHERE id = $1`, [id.toLowerCase()]);
    if (!row) throw notFound();
    return toRecord(row);
  }
}
