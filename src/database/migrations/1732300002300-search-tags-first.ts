import { MigrationInterface, QueryRunner } from 'typeorm';

/** The weight-B text: tags first (up) or, as migration 0600 had it, last (down). */
export const TAGS_FIRST = `left(array_to_string(coalesce(p_tags, '{}'), ' ') || ' '
                                                   || coalesce(string_agg(s.txt, ' ') FILTER (WHERE s.weight = 'B'), ''), 20000)`;
const TAGS_LAST = `left(coalesce(string_agg(s.txt, ' ') FILTER (WHERE s.weight = 'B'), '')
                                                   || ' ' || array_to_string(coalesce(p_tags, '{}'), ' '), 20000)`;

/**
 * item_search_index of migration 0600, with its weight-B text as given, and each weight's text
 * passed through `words` (SQL in, SQL out) before it is parsed: as it is here, and as migration
 * 1732300002600 has it.
 */
export const itemSearchIndex = (weightB: string, words: (text: string) => string = (text) => text) => `
      CREATE OR REPLACE FUNCTION item_search_index(p_tenant uuid, p_type text, p_properties jsonb, p_tags text[],
                                        OUT vector tsvector, OUT title text, OUT document text)
      LANGUAGE plpgsql STABLE PARALLEL SAFE AS $fn$
      DECLARE
        sch jsonb;
      BEGIN
        SELECT t.resolved_schema INTO sch FROM item_types t
         WHERE t.tenant_id IN (p_tenant, '00000000-0000-0000-0000-000000000000') AND t.name = p_type
         ORDER BY t.tenant_id = p_tenant DESC LIMIT 1;
        SELECT setweight(to_tsvector('simple', ${words(`left(coalesce(string_agg(s.txt, ' ') FILTER (WHERE s.weight = 'A'), ''), 10000)`)}), 'A')
            || setweight(to_tsvector('simple', ${words(weightB)}), 'B')
            || setweight(to_tsvector('simple', ${words(`left(coalesce(string_agg(s.txt, ' ') FILTER (WHERE s.weight = 'C'), ''), 100000)`)}), 'C')
            || setweight(to_tsvector('simple', ${words(`left(coalesce(string_agg(s.txt, ' ') FILTER (WHERE s.weight = 'D'), ''), 100000)`)}), 'D'),
               left(coalesce(string_agg(s.txt, ' ') FILTER (WHERE s.weight = 'A'), ''), 1000),
               translate(concat_ws(' · ',
                 left(string_agg(s.txt, ' · ') FILTER (WHERE s.weight = 'A'), 2000),
                 left(string_agg(s.txt, ' · ') FILTER (WHERE s.weight = 'B'), 5000),
                 left(string_agg(s.txt, ' · ') FILTER (WHERE s.weight = 'C'), 30000),
                 left(string_agg(s.txt, ' · ') FILTER (WHERE s.weight = 'D'), 10000)),
               U&'\\E000\\E001', '')
          INTO vector, title, document
          FROM item_search_strings(coalesce(sch, '{}'), p_properties) s;
      END
      $fn$`;

/**
 * Tags first in the search text of weight B. The B text (description-like properties, then the
 * tags) is cut at 20,000 characters before it is indexed, so an item whose description ran that
 * long lost its tags from search. Tags are bounded and short; they now come first, and the cut
 * falls on the description. Only items whose properties and tags together come near the cut
 * can index differently, so only those are recomputed.
 */
export class SearchTagsFirst1732300002300 implements MigrationInterface {
  name = 'SearchTagsFirst1732300002300';

  async up(q: QueryRunner): Promise<void> {
    await q.query(itemSearchIndex(TAGS_FIRST));
    await this.recompute(q);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(itemSearchIndex(TAGS_LAST));
    await this.recompute(q);
  }

  private async recompute(q: QueryRunner): Promise<void> {
    await q.query(`
      UPDATE items i SET (search_vector, search_title, search_document) = (
               SELECT x.vector, x.title, x.document FROM item_search_index(i.tenant_id, i.type, i.properties, i.tags) x)
       WHERE length(i.properties::text) + length(array_to_string(i.tags, ' ')) > 19000`);
  }
}
