/**
 * `GET /search`: PostgreSQL full-text search over the caller's tenant, composed with the
 * `GET /items` filters.
 *
 * Steps of a search:
 *   1. the item filter, exactly as GET /items builds it (ItemsService.filterFor + itemWhere),
 *      including the narrowing to the types the caller may read;
 *   2. the tsquery (search-query.ts: websearch syntax plus a prefix match of the last word);
 *   3. one statement: rank every match, keep the requested page, and only then cut
 *      snippets with ts_headline for those rows (a headline per match would cost ~10x the
 *      search itself);
 *   4. if the text matches nothing at all, the same page over titles and names that are
 *      trigram-similar to the query words (pg_trgm), so "helo wrold" still finds "Hello world";
 *   5. items rendered as GET /items renders them (visibility of extensions and tags).
 *
 * Score: ts_rank_cd (cover density, weights A 1.0 / B 0.4 / C 0.2 / D 0.1, normalised to
 * rank/(rank+1)) times a recency boost by the item's `timestamp` (the time the content is
 * about, so an import of old notes does not look new):
 *   boost = 0.5 + 0.5 * 0.5^(age_days / SEARCH_RECENCY_HALF_LIFE_DAYS)
 * i.e. 1 for a brand-new item, 0.75 at one half-life, towards 0.5 for old ones: recency breaks
 * near-ties and lifts fresh items, but an old, much better match still wins (a pure
 * exponential would bury every year-old item). The clock is the current hour
 * (date_trunc), so the scores, and therefore the order, hold still while a client pages.
 * Order: score desc, then id, so limit/offset pages never overlap or skip.
 */
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { canMetadata } from '../auth/permissions';
import type { Principal } from '../auth/principal';
import { AppConfig } from '../config/app-config';
import { ITEM_COLUMNS, ItemRow } from '../items/item.model';
import { ItemFilter, itemWhere } from '../items/item-filter';
import { ItemsService } from '../items/items.service';
import { matchClause, ParsedSearch, parseSearch, SEARCH_CONFIG, tsquerySql } from './search-query';
import { SearchQuery, SearchResponse } from './search.dto';
import { HEADLINE_OPTIONS, renderSnippet } from './snippet';

export { matchClause } from './search-query';

type HitRow = ItemRow & { score: number; headline: string | null };

/** ITEM_COLUMNS qualified with the items alias `i`. */
const ITEM_COLUMNS_I = ITEM_COLUMNS.split(',')
  .map((c) => `i.${c.trim()}`)
  .join(', ');

/** Fewest letters and digits a query needs before the trigram fallback is worth running. */
const FALLBACK_MIN_CHARS = 3;

@Injectable()
export class SearchService {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly items: ItemsService,
    private readonly config: AppConfig,
  ) {}

  /** The free-text condition of bulk actions' `filter.filter` (same engine as search). */
  matchClause(q: string, params: unknown[], alias = 'i'): string {
    return matchClause(q, params, alias);
  }

  async search(p: Principal, query: SearchQuery): Promise<SearchResponse> {
    const { q, limit, offset, ...filters } = query;
    const filter = await this.items.filterFor(p, filters);
    const parsed = parseSearch(q);

    let rows = await this.run(p, filter, parsed, 'text', limit, offset);
    if (rows.length === 0 && (offset === 0 || !(await this.anyTextMatch(p, filter, parsed)))) {
      rows = await this.run(p, filter, parsed, 'similar', limit, offset);
    }

    const items = await this.items.presentMany(p, rows);
    return {
      results: items.map((item, n) => ({
        item,
        metadata: { item_id: item.id, ...(item.tags !== undefined ? { tags: item.tags } : {}), extensions: item.extensions },
        relevance_score: Number(rows[n].score),
        ...renderSnippet(rows[n].headline),
      })),
    };
  }

  /** The SQL of one page: `text` is full-text search, `similar` the trigram fallback. */
  private async run(
    p: Principal,
    filter: ItemFilter,
    parsed: ParsedSearch,
    mode: 'text' | 'similar',
    limit: number,
    offset: number,
  ): Promise<HitRow[]> {
    const params: unknown[] = [];
    const bind = (v: unknown) => {
      params.push(v);
      return `$${params.length}`;
    };
    const tenant = bind(p.tenantId);
    const where = [itemWhere(p.tenantId, filter, params)];
    let rank: string;
    let headlineQuery: string;
    if (mode === 'text') {
      const tsq = tsquerySql(parsed, params);
      where.push(`i.search_vector @@ ${tsq}`);
      rank = `ts_rank_cd(i.search_vector, ${tsq}, 32)`;
      headlineQuery = tsq;
    } else {
      const letters = parsed.positive.join('').replace(/[^\p{L}\p{N}]/gu, '').length;
      if (letters < FALLBACK_MIN_CHARS) return [];
      const whole = bind(parsed.positive.join(' '));
      // Any word close to a word of the title (word_similarity >= 0.6), or the whole query
      // close to the whole title (similarity >= 0.3): both operators use the trigram index.
      const near = parsed.positive.map((w) => `${bind(w)} <% i.search_title`);
      where.push(`(i.search_title % ${whole} OR ${near.join(' OR ')})`);
      if (parsed.excluded) where.push(`NOT (i.search_vector @@ websearch_to_tsquery('${SEARCH_CONFIG}', ${bind(parsed.excluded)}))`);
      rank = `greatest(similarity(i.search_title, ${whole}), word_similarity(${whole}, i.search_title))`;
      // Highlight the title's words that resemble a query word.
      headlineQuery = `(SELECT coalesce(string_agg(quote_literal(t.word), ' | '), '')::tsquery
                          FROM unnest(tsvector_to_array(to_tsvector('${SEARCH_CONFIG}', i.search_title))) AS t(word)
                         WHERE t.word ~ '^[[:alnum:]]+$'
                           AND EXISTS (SELECT 1 FROM unnest(${bind(parsed.positive)}::text[]) AS q(word)
                                        WHERE similarity(t.word, lower(q.word)) >= 0.25))`;
    }
    const score = `${rank} * ${this.recencyBoost(bind)}`;
    // Tags appear in snippets only for callers who may read them.
    const tags = canMetadata(p, 'read') ? 'i.tags' : `'{}'::text[]`;
    const sql = `
      WITH hits AS (
        SELECT i.id, (${score})::float8 AS score
          FROM items i
         WHERE ${where.join(' AND ')}
         ORDER BY score DESC, i.id
         LIMIT ${bind(limit)} OFFSET ${bind(offset)}
      )
      SELECT ${ITEM_COLUMNS_I}, h.score,
             ts_headline('${SEARCH_CONFIG}', item_search_document(i.tenant_id, i.type, i.properties, ${tags}),
                         ${headlineQuery}, ${bind(HEADLINE_OPTIONS)}) AS headline
        FROM hits h
        JOIN items i ON i.tenant_id = ${tenant} AND i.id = h.id
       ORDER BY h.score DESC, h.id`;
    return this.db.query(sql, params);
  }

  /** Whether the text query matches anything (an empty page past the end is not "no match"). */
  private async anyTextMatch(p: Principal, filter: ItemFilter, parsed: ParsedSearch): Promise<boolean> {
    const params: unknown[] = [];
    const where = itemWhere(p.tenantId, filter, params);
    const rows: unknown[] = await this.db.query(
      `SELECT 1 FROM items i WHERE ${where} AND i.search_vector @@ ${tsquerySql(parsed, params)} LIMIT 1`,
      params,
    );
    return rows.length > 0;
  }

  /** SQL factor for the recency boost (see the header), or 1 when it is off. */
  private recencyBoost(bind: (v: unknown) => string): string {
    const days = this.config.SEARCH_RECENCY_HALF_LIFE_DAYS;
    if (days <= 0) return '1';
    const halfLifeSeconds = bind(days * 86400);
    return `(0.5 + 0.5 * power(0.5, greatest(0, extract(epoch FROM date_trunc('hour', now()) - i."timestamp"))::float8 / ${halfLifeSeconds}::float8))`;
  }
}
