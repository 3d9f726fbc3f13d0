/**
 * `GET /search`: PostgreSQL full-text search over the caller's tenant, composed with the
 * `GET /items` filters.
 *
 * Steps of a search:
 *   1. the item filter, exactly as GET /items builds it (ItemsService.filterFor + itemWhere),
 *      including the narrowing to the types the caller may read;
 *   2. the tsquery (search-query.ts: websearch syntax plus a prefix match of the last word);
 *   3. one statement (search.sql.ts): rank every match, keep the requested page, and only
 *      then cut snippets with ts_headline for those rows (a headline per match would cost
 *      ~10x the search itself); prepared and generically planned (search-statements.ts);
 *   4. if the text matches nothing at all, the same page over titles and names that are
 *      trigram-similar to the query words (pg_trgm), so "helo wrold" still finds "Hello world";
 *      any word may match there, exclusions still apply, and a query with a quoted phrase,
 *      which asks for exact text, gets no fallback;
 *   5. items rendered as GET /items renders them (visibility of extensions and tags, and
 *      their outgoing edges, which the page's statement brings along: no second query).
 *
 * Score: ts_rank_cd (cover density, weights A 1.0 / B 0.4 / C 0.2 / D 0.1, normalised to
 * rank/(rank+1)) times a recency boost by the item's `timestamp` (the time the content is
 * about, so an import of old notes does not look new):
 *   boost = 0.5 + 0.5 * 0.5^(age_days / SEARCH_RECENCY_HALF_LIFE_DAYS)
 * i.e. 1 for a brand-new item, 0.75 at one half-life, towards 0.5 for old ones: recency breaks
 * near-ties and lifts fresh items, but an old, much better match still wins (a pure
 * exponential would bury every year-old item). The clock is the current hour
 * (date_trunc), so the scores, and therefore the order, hold still while a client pages.
 * Order: score desc, then id, so limit/offset pages never overlap or skip while no matching
 * item is written.
 */
import { Injectable } from '@nestjs/common';
import { canMetadata } from '../auth/permissions';
import type { Principal } from '../auth/principal';
import { AppConfig } from '../config/app-config';
import type { FetchedOutgoingEdge } from '../edges/edge-rules';
import type { ItemRow } from '../items/item.model';
import type { ItemFilter } from '../items/item-filter';
import { ItemsService } from '../items/items.service';
import { matchClause, MatchOptions, ParsedSearch, parseSearch } from './search-query';
import { anyMatchStatement, fallbackApplies, searchStatement } from './search.sql';
import { SearchQuery, SearchResponse } from './search.dto';
import { SearchStatements } from './search-statements';
import { renderSnippet } from './snippet';

type HitRow = ItemRow & { score: number; headline: string | null; outgoing: FetchedOutgoingEdge[] | null };

@Injectable()
export class SearchService {
  constructor(
    private readonly statements: SearchStatements,
    private readonly items: ItemsService,
    private readonly config: AppConfig,
  ) {}

  /**
   * The free-text condition of bulk actions' `filter.filter`: the same engine as `q` here
   * (websearch syntax, prefix of the last word), without the interactive typo fallback.
   */
  matchClause(q: string, tenantId: string, params: unknown[], options: MatchOptions = {}): string {
    return matchClause(q, tenantId, params, options);
  }

  async search(p: Principal, query: SearchQuery): Promise<SearchResponse> {
    const { q, limit, offset, ...filters } = query;
    const filter = await this.items.filterFor(p, filters);
    const parsed = parseSearch(q);
    const page = (mode: 'text' | 'similar') =>
      this.statements.query<HitRow>(
        p.tenantId,
        searchStatement({
          tenantId: p.tenantId,
          filter,
          parsed,
          mode,
          limit,
          offset,
          halfLifeDays: this.config.SEARCH_RECENCY_HALF_LIFE_DAYS,
          showTags: canMetadata(p, 'read'),
        }),
      );

    let match: 'text' | 'similar' = 'text';
    let rows = await page(match);
    if (rows.length === 0 && fallbackApplies(parsed) && (offset === 0 || !(await this.anyTextMatch(p, filter, parsed)))) {
      rows = await page('similar');
      // Nothing similar either: the empty answer is the query's own.
      if (rows.length) match = 'similar';
    }

    const items = await this.items.presentWithFetchedEdges(p, rows);
    return {
      results: items.map((item, n) => ({
        item,
        metadata: { item_id: item.id, ...(item.tags !== undefined ? { tags: item.tags } : {}), extensions: item.extensions },
        relevance_score: Number(rows[n].score),
        ...renderSnippet(rows[n].headline),
      })),
      match,
    };
  }

  private async anyTextMatch(p: Principal, filter: ItemFilter, parsed: ParsedSearch): Promise<boolean> {
    return (await this.statements.query(p.tenantId, anyMatchStatement(p.tenantId, filter, parsed, canMetadata(p, 'read')))).length > 0;
  }
}
