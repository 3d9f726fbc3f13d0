/**
 * Snippets. ts_headline marks matches with two private-use characters (the document it reads
 * has them removed first, see migration 1732300000600), and this turns its output into the two
 * forms a result carries: `snippet`, plain text, and `snippet_html`, where everything from
 * the item is HTML-escaped and the only markup is `<mark>` around matches. ts_headline's own
 * StartSel/StopSel would put markup next to unescaped item text, so it is never used for HTML.
 */
export const MATCH_START = '\uE000';
export const MATCH_STOP = '\uE001';
/** What each `<` of the text is while ts_headline reads it, which would take `<…>` for a tag and drop it (search.sql.ts). */
export const LT_STAND_IN = '\uE002';

/** ts_headline options: up to two fragments of 15-35 words around the best matches. */
export const HEADLINE_OPTIONS =
  `StartSel=${MATCH_START}, StopSel=${MATCH_STOP}, MaxWords=35, MinWords=15, ShortWord=3, ` +
  `MaxFragments=2, FragmentDelimiter=" … "`;

/**
 * Characters of an item's text that ts_headline reads. It parses all it is given, ~90 ns a
 * character here (a 100 kB body: 7-10 ms for one snippet, a page of such items: ~0.2 s), so a
 * match further in still finds the item, but its snippet is the text's opening, unmarked.
 */
export const HEADLINE_SOURCE_CHARS = 20_000;

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

const MARKERS = new RegExp(`[${MATCH_START}${MATCH_STOP}${LT_STAND_IN}]`, 'g');
const HTML_TOKENS = new RegExp(`[${MATCH_START}${MATCH_STOP}${LT_STAND_IN}&<>"']`, 'g');

/**
 * Plain and HTML snippets from ts_headline output. One replace pass per form (this runs for
 * every result of every page): markers open and close <mark> (a stray or repeated marker
 * adds nothing), and everything else that is special in HTML is escaped.
 */
export function renderSnippet(headline: string | null | undefined): { snippet: string; snippet_html: string } {
  const text = (headline ?? '').replace(/\s+/g, ' ').trim();
  let open = false;
  let html = text.replace(HTML_TOKENS, (c) => {
    if (c === MATCH_START) {
      if (open) return '';
      open = true;
      return '<mark>';
    }
    if (c === MATCH_STOP) {
      if (!open) return '';
      open = false;
      return '</mark>';
    }
    return ESCAPES[c === LT_STAND_IN ? '<' : c];
  });
  if (open) html += '</mark>';
  return { snippet: text.replace(MARKERS, (c) => (c === LT_STAND_IN ? '<' : '')), snippet_html: html };
}
