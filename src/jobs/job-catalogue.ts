/**
 * The typed job catalogue: every Bull queue, job name and payload of the service in one place,
 * so a producer and its processor cannot disagree about a payload's shape. Bull only schedules: each
 * job's truth lives in a table (webhook_deliveries, bulk_jobs), and a sweeper re-creates jobs
 * that Redis lost.
 */
export const QUEUES = { webhooks: 'webhooks', bulk: 'bulk' } as const;

export interface JobPayloads {
  /**
   * One attempt of a webhook delivery that is due (webhook_deliveries row). `lease`: the row's
   * `lease_until`, taken for this job by an admin's retry; only the instance whose claim finds
   * it unchanged attempts the delivery.
   */
  'webhook.deliver': { tenantId: string; deliveryId: string; webhookId: string; lease?: string };
  /** Run (or resume) a bulk job (bulk_jobs row); the Bull job id is the bulk job's id. */
  'bulk.run': { tenantId: string; jobId: string };
}
