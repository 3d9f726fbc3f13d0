/**
 * The SQL of one search page, as a pure function of its inputs, so that the service and the
 * benchmark (bench/search.ts, which runs it straight through `pg` as the baseline) execute the
 * very same statement. See search.service.ts for the steps and the scoring.
 */
import { outgoingEdgesSql } from '../edges/edge-rules';
import { ITEM_COLUMNS_I } from '../items/item.model';
import { ItemFilter, itemWhere } from '../items/item-filter';
import { headlineQuerySql, matchVector, ParsedSearch, rankVector, SEARCH_CONFIG, textMatch, wordsSql } from './search-query';
import { HEADLINE_OPTIONS, HEADLINE_SOURCE_CHARS, LT_STAND_IN } from './snippet';

export interface SearchStatementInput {
  tenantId: string;
  filter: ItemFilter;
  parsed: ParsedSearch;
  /** `text`: full-text search; `similar`: the trigram fallback over titles and names. */
  mode: 'text' | 'similar';
  limit: number;
  offset: number;
  /** SEARCH_RECENCY_HALF_LIFE_DAYS; 0 = no recency boost. */
  halfLifeDays: number;
  /** Whether the caller may read tags (metadata): they then count in matching and appear in snippets. */
  showTags: boolean;
}

export interface Statement {
  sql: string;
  params: unknown[];
}

/** Fewest letters and digits a query needs before the trigram fallback is worth running. */
const FALLBACK_MIN_CHARS = 3;

/** Whether the trigram fallback applies to this query at all. */
export function fallbackApplies(parsed: ParsedSearch): boolean {
  return !parsed.phrase && parsed.positive.join('').replace(/[^\p{L}\p{N}]/gu, '').length >= FALLBACK_MIN_CHARS;
}

/**
 * Rank every match, keep the page, and only then cut snippets (ts_headline) for the page's
 * rows: the CTE's LIMIT runs before the headline, which would cost ~10x the search if it ran
 * on every match. Only ids and scores go through the sort. The page's outgoing edges come in
 * the same statement (`outgoing`, see outgoingEdgesSql), which saves GET /items' separate edge
 * lookup its round trip.
 */
export function searchStatement(input: SearchStatementInput): Statement {
  const { parsed } = input;
  const params: unknown[] = [];
  const bind = (v: unknown) => {
    params.push(v);
    return `$${params.length}`;
  };
  const tenant = bind(input.tenantId);
  const where = [itemWhere(input.tenantId, input.filter, params)];
  let rank: string;
  let headlineQuery: string;
  if (input.mode === 'text') {
    const match = textMatch(parsed, input.tenantId, params, { tags: input.showTags });
    where.push(match.condition);
    rank = `ts_rank_cd(${rankVector('i', input.showTags)}, ${match.tsquery}, 32)`;
    headlineQuery = headlineQuerySql(parsed, params);
  } else {
    const whole = bind(parsed.positive.join(' '));
    // Any query word close to some stretch of the title: word_similarity >= 0.6 (pg_trgm's
    // word_similarity_threshold), through the trigram index. Whole-title similarity (`%`) is
    // not used to select: a short query shares a few trigrams with a great many long titles,
    // so its index scan hands back thousands of candidates to recheck.
    const near = parsed.positive.map((w) => `${bind(w)} <% i.search_title`);
    where.push(`(${near.join(' OR ')})`);
    if (parsed.excluded) where.push(`NOT (${matchVector('i', input.showTags)} @@ (SELECT websearch_to_tsquery('${SEARCH_CONFIG}', ${bind(parsed.excluded)})))`);
    rank = `greatest(similarity(i.search_title, ${whole}), word_similarity(${whole}, i.search_title))`;
    // Highlight the title's words that resemble a query word.
    headlineQuery = `(SELECT coalesce(string_agg(quote_literal(t.word), ' | '), '')::tsquery
                        FROM unnest(tsvector_to_array(to_tsvector('${SEARCH_CONFIG}', ${wordsSql('i.search_title')}))) AS t(word)
                       WHERE t.word ~ '^[[:alnum:]]+$'
                         AND EXISTS (SELECT 1 FROM unnest(${bind(parsed.positive)}::text[]) AS q(word)
                                      WHERE similarity(t.word, lower(q.word)) >= 0.25))`;
  }
  const score = `${rank} * ${recencyBoost(input.halfLifeDays, bind)}`;
  // The stored document (migration 1732300000600), with the tags after it when the caller may
  // read them; the match markers are taken out of tags as the document has them taken out.
  const document = input.showTags
    ? `concat_ws(' · ', nullif(i.search_document, ''), nullif(translate(array_to_string(i.tags, ' '), U&'\\E000\\E001', ''), ''))`
    : 'i.search_document';
  // ts_headline parses the text it shows, and would drop a `<…>` as an XML tag, words and all:
  // each `<` goes in as a private-use stand-in that renderSnippet turns back (one already in the
  // text is dropped, as the match markers are). A space after it instead changed the text.
  const standIn = bind(LT_STAND_IN);
  const shown = `replace(translate(left(${document}, ${HEADLINE_SOURCE_CHARS}), ${standIn}, ''), '<', ${standIn})`;
  const sql = `
    WITH hits AS (
      SELECT i.id, (${score})::float8 AS score
        FROM items i
       WHERE ${where.join(' AND ')}
       ORDER BY score DESC, i.id
       LIMIT ${bind(input.limit)} OFFSET ${bind(input.offset)}
    )
    SELECT ${ITEM_COLUMNS_I}, h.score,
           ts_headline('${SEARCH_CONFIG}', ${shown}, ${headlineQuery}, ${bind(HEADLINE_OPTIONS)}) AS headline,
           ${outgoingEdgesSql(tenant)} AS outgoing
      FROM hits h
      JOIN items i ON i.tenant_id = ${tenant} AND i.id = h.id
     ORDER BY h.score DESC, h.id`;
  return { sql, params };
}

/** Whether the text query matches anything at all (an empty page past the end is not "no match"). */
export function anyMatchStatement(tenantId: string, filter: ItemFilter, parsed: ParsedSearch, tags: boolean): Statement {
  const params: unknown[] = [];
  const where = itemWhere(tenantId, filter, params);
  return { sql: `SELECT 1 FROM items i WHERE ${where} AND ${textMatch(parsed, tenantId, params, { tags }).condition} LIMIT 1`, params };
}

/**
 * The recency factor 0.5 + 0.5 * 0.5^(age / half-life) by the item `timestamp`, written as
 * 0.5 + 0.5 * exp(-ln 2 * age / half-life) in float8 arithmetic (extract() would compute in
 * numeric, several times slower per row). The clock is read once per statement (an InitPlan)
 * and truncated to the hour, so scores hold still while a client pages. '1' when off.
 */
function recencyBoost(halfLifeDays: number, bind: (v: unknown) => string): string {
  if (halfLifeDays <= 0) return '1';
  const perSecond = bind(Math.LN2 / (halfLifeDays * 86400));
  const clock = `(SELECT date_part('epoch', date_trunc('hour', now())))`;
  // greatest(-700, ...): exp() raises an underflow error below about -745 (timestamps centuries old).
  return `(0.5 + 0.5 * exp(greatest(-700, least(0, date_part('epoch', i."timestamp") - ${clock}) * ${perSecond}::float8)))`;
}
