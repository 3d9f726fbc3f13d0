import { MigrationInterface, QueryRunner } from 'typeorm';
import { COMMON_WORDS_0700, itemSearchGramsBody } from './1732300000700-search-common-grams';

/**
 * Common grams also for the most frequent English words (src/search/common-words.ts says why):
 * `"first of"` pairs a stop word with a frequent one, and without its gram every item holding
 * both words was a candidate. The grams column is recomputed with the longer list: a
 * generated column keeps its stored values when its function changes, so it is dropped and
 * added again (one rewrite of the table), and its index with it.
 */
export const FREQUENT_WORDS_0900 =
  'one would time year people way day man thing woman life child world school state family ' +
  'student group country problem hand part place case week company system program question work ' +
  'government number night point home water room mother area money story fact month lot right ' +
  'study book eye job word business issue side kind head house service friend father power hour ' +
  'game line end member law car city community name president team minute idea kid body ' +
  'information back parent face others level office door health person art war history party ' +
  'result change morning reason research girl guy moment air teacher force education say get make ' +
  'go know take see come think look want give use find tell ask seem feel try leave call put mean ' +
  'keep let begin show hear play run move live believe hold bring happen write provide sit stand ' +
  'lose pay meet include continue set learn lead understand watch follow stop create speak read ' +
  'allow add spend grow open walk win offer remember love consider appear buy wait serve die send ' +
  'expect build stay fall cut reach kill remain suggest raise pass sell require report decide ' +
  'pull new good first last long great little old big high different small large next early young ' +
  'important public bad able two three four five six seven eight nine ten hundred thousand ' +
  'million also like even still many much may might must could shall since later made said used ' +
  'known found well got without within around another every never always often however although ' +
  'though upon yet ever';

async function rebuildGrams(q: QueryRunner, words: string): Promise<void> {
  await q.query(`ALTER TABLE items DROP COLUMN search_grams`); // drops items_search_grams_scoped with it
  await q.query(`CREATE OR REPLACE FUNCTION item_search_grams(p_vector tsvector) ${itemSearchGramsBody(words)}`);
  await q.query(`ALTER TABLE items ADD COLUMN search_grams tsvector GENERATED ALWAYS AS (item_search_grams(search_vector)) STORED`);
  await q.query(`CREATE INDEX items_search_grams_scoped ON items USING gin (item_search_scoped(tenant_id, search_grams))`);
  await q.query(`ANALYZE items`);
}

export class SearchFrequentWordGrams1732300000900 implements MigrationInterface {
  name = 'SearchFrequentWordGrams1732300000900';

  async up(q: QueryRunner): Promise<void> {
    await rebuildGrams(q, `${COMMON_WORDS_0700} ${FREQUENT_WORDS_0900}`);
  }

  async down(q: QueryRunner): Promise<void> {
    await rebuildGrams(q, COMMON_WORDS_0700);
  }
}
