/**
 * Words so frequent that a quoted phrase made of them ("in the", "to be or not to be") finds
 * a large share of all items as candidates: the GIN index only knows which items contain each
 * word, so every item with both words was fetched and its positions checked. Items therefore
 * also index each adjacent pair of these words as one lexeme ("common grams", as Lucene's
 * CommonGramsFilter does), and a phrase with such a pair first selects the items holding the
 * pair (search-query.ts, migration 1732300000700).
 *
 * The list is PostgreSQL's english.stop. Migration 1732300000700 copied it into the database;
 * changing it here takes a new migration that recomputes items.search_grams.
 */
export const COMMON_WORDS: ReadonlySet<string> = new Set(
  [
    'i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she',
    'her hers herself it its itself they them their theirs themselves what which who whom this that',
    'these those am is are was were be been being have has had having do does did doing a an the and',
    'but if or because as until while of at by for with about against between into through during',
    'before after above below to from up down in out on off over under again further then once here',
    'there when where why how all any both each few more most other some such no nor not only own',
    'same so than too very s t can will just don should now',
  ]
    .join(' ')
    .split(' '),
);
