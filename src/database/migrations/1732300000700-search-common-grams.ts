import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Common grams for phrase search (see src/search/common-words.ts for why).
 *
 * `items.search_grams` holds one lexeme per adjacent pair of common words in `search_vector`,
 * the two words joined by a space ('in the'; the parser never makes a lexeme with a space, so
 * a gram cannot collide with a word). It is derived from the stored vector's own positions,
 * which are what the phrase operator `<->` checks: every item that matches `'in' <-> 'the'`
 * holds the gram 'in the', so requiring the gram never loses a match. It is a generated column,
 * computed after the BEFORE trigger has refreshed the vector, so every write path keeps it.
 *
 * The word list is a copy of PostgreSQL's english.stop, taken when this migration was written,
 * so that the database keeps the list its grams were built with (a unit test checks that
 * src/search/common-words.ts still agrees).
 */
export const COMMON_WORDS_0700 =
  'i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she ' +
  'her hers herself it its itself they them their theirs themselves what which who whom this that ' +
  'these those am is are was were be been being have has had having do does did doing a an the and ' +
  'but if or because as until while of at by for with about against between into through during ' +
  'before after above below to from up down in out on off over under again further then once here ' +
  'there when where why how all any both each few more most other some such no nor not only own ' +
  'same so than too very s t can will just don should now';

/**
 * What follows `CREATE FUNCTION item_search_grams(p_vector tsvector)`: the grams of a vector
 * over a space-separated word list. Migration 1732300000900 redefines the function with it.
 */
export function itemSearchGramsBody(words: string): string {
  const list = `'{${words.split(' ').join(',')}}'::text[]`;
  return `RETURNS tsvector
      LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
        WITH common AS (
          SELECT u.lexeme, p.pos
            FROM unnest(p_vector) AS u(lexeme, positions, weights), unnest(u.positions) AS p(pos)
           WHERE u.lexeme = ANY (${list})
        )
        SELECT coalesce(array_to_tsvector(array_agg(DISTINCT a.lexeme || ' ' || b.lexeme)), ''::tsvector)
          FROM common a JOIN common b ON b.pos = a.pos + 1
      $fn$`;
}

export class SearchCommonGrams1732300000700 implements MigrationInterface {
  name = 'SearchCommonGrams1732300000700';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE FUNCTION item_search_grams(p_vector tsvector) ${itemSearchGramsBody(COMMON_WORDS_0700)}`);
    await q.query(`ALTER TABLE items ADD COLUMN search_grams tsvector GENERATED ALWAYS AS (item_search_grams(search_vector)) STORED`);
    await q.query(`CREATE INDEX items_search_grams ON items USING gin (tenant_id, search_grams)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX items_search_grams`);
    await q.query(`ALTER TABLE items DROP COLUMN search_grams`);
    await q.query(`DROP FUNCTION item_search_grams(tsvector)`);
  }
}
