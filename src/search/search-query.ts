/**
 * The search query language, in one place for `GET /search` and for the free-text
 * `filter.filter` of bulk actions, so both select exactly alike.
 *
 * Syntax is websearch_to_tsquery's: words are ANDed, `"quoted phrases"` match in order, `or`
 * between two terms is OR, `-term` / `-"phrase"` excludes. On top of it the last word, when
 * it is a plain word (letters and digits, outside quotes, not negated, not `or`), matches as
 * a prefix, so "hel" finds "hello" while the user is still typing. websearch_to_tsquery has
 * no prefix syntax, so its output is rewritten with ts_rewrite: the word is given to it as a
 * placeholder, which is replaced by the word's lexeme with `:*`. The rewrite works on the
 * tsquery websearch built, so `or` and phrase structure are never re-parsed here.
 *
 * User text only ever reaches SQL as bind parameters.
 *
 * Every query-derived value is a scalar sub-select, `(SELECT ...)`, which PostgreSQL evaluates
 * once per execution (an InitPlan). So the statements have a good generic plan: prepared once
 * and run with new parameters (search-statements.ts), they neither re-parse the query per row
 * nor depend on the planner folding the query to a constant.
 */
import { COMMON_WORDS } from './common-words';

/**
 * The text search configuration of the stored vectors (migration 1732300000500, which explains
 * the choice). Queries must use the same one.
 */
export const SEARCH_CONFIG = 'simple';

/**
 * Characters read as spaces before text is parsed into words, in the stored vectors (migration
 * 1732300002600) and in queries alike. PostgreSQL's parser takes `<…>` for an XML tag and drops
 * it, words inside and all, and keeps URLs, host names, e-mail addresses and file names whole:
 * "pademelon" would not find "List<pademelon>", nor "bilby" find "www.bilby.org/marsupials".
 */
export const WORD_BREAKS = '<>@/:.';
const WORD_BREAK = new RegExp(`[${WORD_BREAKS}]`, 'g');

/** `sql` (a text expression) with WORD_BREAKS read as spaces. */
export const wordsSql = (sql: string) => `translate(${sql}, '${WORD_BREAKS}', '${' '.repeat(WORD_BREAKS.length)}')`;

export const MAX_QUERY_LENGTH = 1000;
/**
 * Most words a query may hold, phrases' words and excluded ones included: matching a phrase
 * costs PostgreSQL about the square of its length for each item it checks (25 ms an item for
 * 32 words of a word the item repeats, 100 ms for 64), with no bound below the 1000 characters.
 */
export const MAX_QUERY_WORDS = 32;
/** How many words of a query the trigram fallback looks at. */
const MAX_FALLBACK_WORDS = 8;

interface Term {
  text: string;
  quoted: boolean;
  negated: boolean;
}

export interface ParsedSearch {
  /** The query for websearch_to_tsquery: its terms as given, split at WORD_BREAKS. */
  text: string;
  /** The last plain word, matched as a prefix. */
  prefix?: string;
  /** Words that should appear (not negated, not operators), the first MAX_FALLBACK_WORDS: the trigram fallback's input. */
  positive: string[];
  /** All of those words: what snippets highlight. */
  wanted: string[];
  /** The excluded words and phrases, as a websearch query matching any of them; '' if none. */
  excluded: string;
  /** Whether the query asks for an exact phrase (then no fuzzy fallback applies). */
  phrase: boolean;
  /**
   * Common grams ('in the') that every match must hold: the adjacent common-word pairs of the
   * quoted phrases the query requires (not negated, and no `or` in the query, which could make
   * a phrase optional). Empty for most queries.
   */
  grams: string[];
  /**
   * The query the tenant-scoped index is searched with: the query itself or, when it excludes
   * something and has no `or`, only what it requires (the exact test applies the exclusion).
   * Undefined when the index cannot narrow the search: a query of exclusions only, or one with
   * an exclusion under `or` ('a or -b' matches every item without b; GIN would read the whole
   * index, every tenant's part of it, and an excluded phrase has no index form at all).
   */
  indexText?: string;
}

const PLAIN_WORD = /^[\p{L}\p{N}]+$/u;
const HAS_WORD_CHAR = /[\p{L}\p{N}]/u;

/**
 * White space to websearch_to_tsquery, or more: beyond ASCII, PostgreSQL asks the locale
 * (iswspace). Reading more as space than it does is safe, as the query it is given is written
 * back from the terms, with plain spaces between them.
 */
const SPACE = /[\s\u0085\u180e]/u;
/** The characters websearch_to_tsquery skips between terms, and which end a word (ISOPERATOR). */
const OPERATORS = new Set(['!', '&', '|', '(', ')', '<']);
/** What ends a word besides white space: an operator character, a quote, or `:` (which begins the next word). */
const WORD_END = new Set([...OPERATORS, '"', ':']);
/** Letters and digits to PostgreSQL's t_isalnum (beyond ASCII it asks the locale: this is near). */
const ALNUM = /[\p{L}\p{N}]/u;

/**
 * Splits a query into the terms websearch_to_tsquery reads, as its tokenizer does
 * (gettoken_query_websearch in PostgreSQL's tsquery.c, with gettoken_tsvector for a word):
 * - before a term, white space and the operator characters `! & | ( ) <` are skipped, and each
 *   `-` negates the term: `a(-b`, `a!-b`, `a&-b`, `a"x"-b` and `a - b` exclude b as `a -b`
 *   does, and `--b` is `!!b`, b itself. Inside a word `-` is a letter (`a-b`, `a,-b`, `a.-b`);
 * - `"` opens a phrase, up to the next `"` or the end;
 * - a word runs up to white space, an operator character, `"` or `:`;
 * - after a term, `or` is OR when neither a letter, a digit, `-` nor `_` follows it and something
 *   else than white space comes later (parse_or_operator); anywhere else it is a word. Other
 *   characters there (no space, no operator) start the next term, ANDed.
 * A term without lexemes (`-,`) PostgreSQL drops, with its `-`; here it stays, which only makes
 * the checks below more careful. Since the query PostgreSQL is given is written back from these
 * terms (websearchText), what it negates is exactly what is negated here.
 */
function terms(text: string): Array<Term | 'or'> {
  const c = Array.from(text);
  const out: Array<Term | 'or'> = [];
  let afterTerm = false;
  let negations = 0;
  const push = (t: string, quoted: boolean) => {
    out.push({ text: t, quoted, negated: negations % 2 === 1 });
    negations = 0;
    afterTerm = true;
  };
  let i = 0;
  while (i < c.length) {
    const ch = c[i];
    if (afterTerm) {
      if (orOperator(c, i)) {
        out.push('or');
        afterTerm = false;
        i += 2;
      } else if (OPERATORS.has(ch) || SPACE.test(ch)) {
        i++;
      } else {
        afterTerm = false;
      }
    } else if (ch === '-') {
      negations++;
      i++;
    } else if (ch === '"') {
      let j = i + 1;
      while (j < c.length && c[j] !== '"') j++;
      push(c.slice(i + 1, j).join(''), true);
      i = j + 1;
    } else if (OPERATORS.has(ch) || SPACE.test(ch)) {
      i++;
    } else {
      let j = i + 1;
      while (j < c.length && !WORD_END.has(c[j]) && !SPACE.test(c[j])) j++;
      push(c.slice(i, j).join(''), false);
      i = j;
    }
  }
  // `or` with no term after it (`a or (`) ORs with nothing, which PostgreSQL drops.
  if (out[out.length - 1] === 'or') out.pop();
  return out;
}

/** Whether `or` at c[i] is the operator (parse_or_operator); only asked right after a term. */
function orOperator(c: string[], i: number): boolean {
  if (!['o', 'O'].includes(c[i]) || !['r', 'R'].includes(c[i + 1])) return false;
  const next = c[i + 2];
  if (next === undefined || next === '-' || next === '_' || ALNUM.test(next)) return false;
  return c.slice(i + 3).some((ch) => !SPACE.test(ch));
}

/**
 * A term with WORD_BREAKS read as spaces. A word they split becomes a phrase, as the stored
 * text has its parts in a row ("www.bilby.org" finds them in that order), and a negated one
 * stays one term.
 */
function splitTerm(t: Term | 'or'): Term | 'or' {
  if (t === 'or') return t;
  const text = t.text.replace(WORD_BREAK, ' ');
  return text === t.text ? t : { ...t, text: text.trim(), quoted: true };
}

/**
 * The query websearch_to_tsquery reads, written back from its terms. A word that begins with
 * `or` is quoted (which changes nothing else for websearch_to_tsquery), so that it can never be
 * read as OR here, whatever PostgreSQL's locale deems a letter.
 */
const websearchText = (list: Array<Term | 'or'>) =>
  list
    .map((t) => (t === 'or' ? 'or' : `${t.negated ? '-' : ''}${t.quoted || /^or(?![-_a-z0-9])/i.test(t.text) ? `"${t.text}"` : t.text}`))
    .join(' ');

export function parseSearch(q: string): ParsedSearch {
  const list = terms(q.trim()).map(splitTerm);
  const text = websearchText(list);
  const last = list[list.length - 1];
  const prefix =
    last !== undefined && last !== 'or' && !last.quoted && !last.negated && PLAIN_WORD.test(last.text) && last.text.toLowerCase() !== 'or'
      ? last.text
      : undefined;
  const operands = list.filter((t): t is Term => t !== 'or');
  const wanted = wordsOf(operands.filter((t) => !t.negated));
  const excluded = operands
    .filter((t) => t.negated && HAS_WORD_CHAR.test(t.text))
    .map((t) => `"${t.text}"`)
    .join(' or ');
  const phrase = operands.some((t) => t.quoted && !t.negated);
  const hasOr = list.includes('or');
  const required = hasOr ? [] : operands.filter((t) => t.quoted && !t.negated);
  // Under `or`, an exclusion may be what matches ('a or -b'): then the index is not searched.
  const kept = hasOr && operands.some((t) => t.negated) ? [] : operands.filter((t) => !t.negated);
  return {
    text,
    prefix,
    positive: wanted.slice(0, MAX_FALLBACK_WORDS),
    wanted,
    excluded,
    phrase,
    grams: [...new Set(required.flatMap((t) => commonGrams(t.text)))],
    indexText: kept.length === 0 ? undefined : kept.length === operands.length ? text : websearchText(kept),
  };
}

const wordsOf = (operands: Term[]) => operands.flatMap((t) => t.text.split(/\s+/u)).filter((w) => HAS_WORD_CHAR.test(w));

/**
 * How many words a query holds, as MAX_QUERY_WORDS counts them: every run of letters, digits and
 * marks, as PostgreSQL's parser splits them (at `,` `_` `'` `+` `-` too, not only at spaces), so
 * that `w,w,w…` counts each word of the phrase it becomes.
 */
export function queryWordCount(q: string): number {
  return terms(q.trim())
    .map(splitTerm)
    .reduce((n, t) => (t === 'or' ? n : n + (t.text.match(/[\p{L}\p{N}\p{M}]+/gu)?.length ?? 0)), 0);
}

const PLAIN_PHRASE = /^[\p{L}\p{N}]+(\s+[\p{L}\p{N}]+)+$/u;

/**
 * The common grams of one phrase, as migrations 1732300000700 and 1732300000900 index them.
 * Only for phrases of plain words, which the parser splits exactly at the spaces; any other
 * phrase gets none, and is then matched without the gram shortcut (never the other way round,
 * which could lose hits).
 */
function commonGrams(phrase: string): string[] {
  const text = phrase.trim().toLowerCase();
  if (!PLAIN_PHRASE.test(text)) return [];
  const words = text.split(/\s+/u);
  return words.slice(1).flatMap((w, i) => (COMMON_WORDS.has(words[i]) && COMMON_WORDS.has(w) ? [`${words[i]} ${w}`] : []));
}

/** Appends `value` to `params` and returns its placeholder. */
function bind(params: unknown[], value: unknown): string {
  params.push(value);
  return `$${params.length}`;
}

/** SQL of the tsquery for `q`, a scalar sub-select (its parameters appended to `params`). */
export function tsquerySql(q: ParsedSearch | string, params: unknown[]): string {
  const parsed = typeof q === 'string' ? parseSearch(q) : q;
  if (parsed.prefix === undefined) return `(SELECT websearch_to_tsquery('${SEARCH_CONFIG}', ${bind(params, parsed.text)}))`;
  // ts_rewrite replaces every copy of its target: rewriting the word itself would also widen it
  // where it appears earlier, inside a phrase ('"foo bar" bar' would find "foo barista"). The
  // last word is therefore written as a placeholder found nowhere else in the query, and only
  // that is rewritten.
  const { text, placeholder } = withPlaceholder(parsed.text, parsed.prefix);
  return (
    `(SELECT ts_rewrite(websearch_to_tsquery('${SEARCH_CONFIG}', ${bind(params, text)}), ` +
    `to_tsquery('${SEARCH_CONFIG}', ${bind(params, placeholder)}), ` +
    `to_tsquery('${SEARCH_CONFIG}', quote_literal(${bind(params, parsed.prefix)}::text) || ':*')))`
  );
}

/**
 * `text` (websearchText's, which writes the prefix word last, quoted when it begins with `or`)
 * with that word replaced by a plain word of ASCII letters and digits that occurs nowhere in it,
 * and so is one lexeme of its own to the parser.
 */
export function withPlaceholder(text: string, prefix: string): { text: string; placeholder: string } {
  const written = text.endsWith(`"${prefix}"`) ? `"${prefix}"` : prefix;
  const rest = text.slice(0, text.length - written.length);
  const lower = rest.toLowerCase();
  let n = 0;
  while (lower.includes(`x${n}`)) n++;
  return { text: `${rest}x${n}`, placeholder: `x${n}` };
}

/**
 * SQL of the tsquery snippets are cut with (a scalar sub-select): any of the query's wanted
 * words, each lexeme once, the prefix word as a prefix. Not the query itself: ts_headline's cost
 * grows with the query's items that match at the same places, without bound for a phrase of a
 * repeated word (100 words of one exhausted the database server's memory), and a snippet only
 * has to show where the words are.
 */
export function headlineQuerySql(parsed: ParsedSearch, params: unknown[]): string {
  const prefix = parsed.prefix === undefined ? 'NULL' : `(tsvector_to_array(to_tsvector('${SEARCH_CONFIG}', ${bind(params, parsed.prefix)})))[1]`;
  // A lexeme quoted as tsquery input reads it: quotes doubled, backslashes escaped.
  const quoted = `'''' || replace(replace(t.word, '\\', '\\\\'), '''', '''''') || ''''`;
  return (
    `(SELECT coalesce(string_agg(${quoted} || CASE WHEN t.word = ${prefix} THEN ':*' ELSE '' END, ' | '), '')::tsquery ` +
    `FROM unnest(tsvector_to_array(to_tsvector('${SEARCH_CONFIG}', ${bind(params, parsed.wanted.join(' '))}))) AS t(word))`
  );
}

/**
 * A SQL condition: the item (alias `alias`) of tenant `tenantId` matches the free-text query
 * `q` (phrases, `or`, exclusion, prefix of the last word), plus the tsquery itself for ranking
 * and snippets. Parameters are appended to `params`.
 *
 * Items are found through the tenant-scoped index (migration 1732300000800): its lexemes carry
 * the tenant's tag, so the posting lists it reads hold that tenant's items only, and the query
 * is tagged alike. The tag is a hash bucket, not an identity: the caller's statement must also
 * test `tenant_id` (itemWhere does). Where the index query is wider than the query (phrases,
 * which the index only narrows, exclusions left out of it), the exact test on the item's own
 * vector follows. A phrase of common words is looked up by its common grams instead (their own
 * tenant-scoped index). item_search_scoped_query returns NULL only for a negated group, which
 * never reaches it: indexText holds no exclusion.
 */
export function textMatch(
  q: ParsedSearch | string,
  tenantId: string,
  params: unknown[],
  { alias = 'i', tags = true }: MatchOptions = {},
): { condition: string; tsquery: string } {
  const parsed = typeof q === 'string' ? parseSearch(q) : q;
  const tsquery = tsquerySql(parsed, params);
  const exact = `${matchVector(alias, tags)} @@ ${tsquery}`;
  const scoped = (column: string, query: string) => {
    const tagged = `item_search_scoped_query(${bind(params, tenantId)}::uuid, ${query})`;
    // search_vector holds the tags: for a caller who may not read them, a NOT in its query would
    // exclude through a tag. The parser keeps every NOT out of the index query; should one ever
    // reach it, the index matches nothing rather than tell the tag.
    const guarded = tags || column !== 'search_vector' ? tagged : `CASE WHEN (${query})::text ~ '${NEGATION}' THEN NULL ELSE ${tagged} END`;
    return `item_search_scoped(${alias}.tenant_id, ${alias}.${column}) @@ (SELECT ${guarded})`;
  };
  let condition: string;
  if (parsed.grams.length > 0 && tags) {
    // Not for a caller who may not read tags: the grams are those of search_vector, where the tags
    // sit between the title and the rest, so a phrase across that place is a gram of untagged
    // items only. The grams come from COMMON_WORDS (letters only), so quoting them as lexemes is
    // safe. They are the selective part of such a query: its words are common, and reading their
    // postings from the vector index as well would cost more than testing the candidates' vectors.
    condition = `${scoped('search_grams', `${bind(params, parsed.grams.map((g) => `'${g}'`).join(' & '))}::tsquery`)} AND ${exact}`;
  } else if (parsed.indexText === parsed.text) {
    // The whole query is in the index. For &, | of lexemes and prefixes the tagged index
    // answers it exactly (with the caller's tenant_id test), so the exact test runs only for
    // what the index query widens, phrase operators. Whether the query has any is settled once
    // per execution (an InitPlan), so for the others each row costs one test of a boolean.
    condition = tags
      ? `${scoped('search_vector', tsquery)} AND ((SELECT ${tsquery}::text !~ '${WIDENED_IN_INDEX}') OR ${exact})`
      : `${scoped('search_vector', tsquery)} AND ${exact}`;
  } else if (parsed.indexText !== undefined) {
    condition = `${scoped('search_vector', tsquerySql({ ...parsed, text: parsed.indexText }, params))} AND ${exact}`;
  } else {
    condition = exact;
  }
  return { condition, tsquery };
}

export interface MatchOptions {
  /** The items table's alias in the statement. */
  alias?: string;
  /** Whether the caller may read tags (metadata:read); if not, an item must match without them. */
  tags?: boolean;
}

/**
 * The vector an item is tested against. The indexed one holds the tags (in the weight-B text,
 * beside descriptions), so for a caller who may not read tags, a match or an exclusion through
 * a tag would tell them the tag: theirs is built from the item's stored text without tags
 * (`search_document`, the snippets' source: cut per field, 47,000 characters at most).
 */
export function matchVector(alias: string, tags: boolean): string {
  return tags ? `${alias}.search_vector` : `to_tsvector('${SEARCH_CONFIG}', ${wordsSql(`${alias}.search_document`)})`;
}

/**
 * What a match is ranked on. Tags share weight B with description-like properties in
 * search_vector, so for a caller who may not read tags ranking on it would tell a tagged item
 * from an untagged twin by its score. Such a caller ranks on the title at weight A beside the
 * document, which has no tags: titles still come first, and nothing else is weighted.
 */
export function rankVector(alias: string, tags: boolean): string {
  return tags
    ? `${alias}.search_vector`
    : `(setweight(to_tsvector('${SEARCH_CONFIG}', ${wordsSql(`${alias}.search_title`)}), 'A') || ${matchVector(alias, false)})`;
}

/**
 * What item_search_scoped_query widens (migration 1732300000800) in a tsquery's text form:
 * phrase operators. Lexemes are quoted in that form, so one holding these characters can only
 * make the exact test run when it need not.
 */
const WIDENED_IN_INDEX = '<(-|[0-9]+)>';

/** A NOT in a tsquery's text form (outside its quoted lexemes, quotes doubled), as an SQL string's body. */
const NEGATION = `^(?:[^'']|''(?:[^'']|'''')*'')*!`;

/**
 * The free-text condition of bulk actions' `filter.filter`: the same engine as `GET /search`,
 * without the typo-tolerant fallback, which only applies to interactive search.
 */
export function matchClause(q: string, tenantId: string, params: unknown[], options: MatchOptions = {}): string {
  return textMatch(q, tenantId, params, options).condition;
}
