import { MigrationInterface, QueryRunner } from 'typeorm';
import { itemSearchIndex, TAGS_FIRST } from './1732300002300-search-tags-first';

/**
 * Search text is parsed with `<`, `>`, `@`, `/`, `:` and `.` read as spaces (as queries are:
 * src/search/search-query.ts, WORD_BREAKS). PostgreSQL's parser took `<…>` for an XML tag and
 * dropped it, words inside and all ("List<pademelon>", "a<b and c>d"), and kept URLs, host
 * names, e-mail addresses and file names whole, so none of their parts could be searched for.
 * Every item's vector is computed again.
 */
const WORD_BREAKS = (text: string) => `translate(${text}, '<>@/:.', '      ')`;

export class SearchWordBreaks1732300002600 implements MigrationInterface {
  name = 'SearchWordBreaks1732300002600';

  async up(q: QueryRunner): Promise<void> {
    await q.query(itemSearchIndex(TAGS_FIRST, WORD_BREAKS));
    await this.recompute(q);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(itemSearchIndex(TAGS_FIRST));
    await this.recompute(q);
  }

  private async recompute(q: QueryRunner): Promise<void> {
    await q.query(`
      UPDATE items i SET (search_vector, search_title, search_document) = (
               SELECT x.vector, x.title, x.document FROM item_search_index(i.tenant_id, i.type, i.properties, i.tags) x)`);
  }
}
