/** The merge policy a type gives each property: how a write made on an older version of an item merges with what changed since (README, `version_conflict`). */
import type { JsonSchema } from './type-schema';

export const MERGE_POLICIES = ['manual', 'client_wins', 'server_wins', 'union'] as const;
export type MergePolicy = (typeof MERGE_POLICIES)[number];

/** Merge policy of every property of a type, defaulting to `manual`. */
export function resolveMergePolicy(schema: JsonSchema, policy: Record<string, MergePolicy>): Record<string, MergePolicy> {
  const out: Record<string, MergePolicy> = {};
  for (const name of Object.keys(schema.properties ?? {})) out[name] = policy[name] ?? 'manual';
  return { ...out, ...policy };
}
