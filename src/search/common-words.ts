/**
 * Words so frequent that a quoted phrase made of them ("in the", "first of", "to be or not to
 * be") finds a large share of all items as candidates: the GIN index only knows which items
 * contain each word, so every item with both words was fetched and its positions checked
 * (`"first of"` on 100k items: 11,591 candidates for 560 matches, 18 ms). Items therefore also
 * index each adjacent pair of these words as one lexeme ("common grams", as Lucene's
 * CommonGramsFilter does), and a phrase with such a pair first selects the items holding the
 * pair (search-query.ts, migrations 1732300000700 and 1732300000900).
 *
 * The list is PostgreSQL's english.stop and the most frequent other English words (general
 * frequency lists: the commonest nouns, verbs, adjectives, numbers and adverbs). Pairs of which
 * only one word is on it are not indexed: that would index most adjacent pairs of any text
 * (measured: inserts ~54% slower, the grams index 4 -> 69 MB per 100k items). The database
 * keeps a copy (the latest migration that sets it); changing the list here takes a new
 * migration that recomputes items.search_grams.
 */
const STOP_WORDS = [
  'i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she',
  'her hers herself it its itself they them their theirs themselves what which who whom this that',
  'these those am is are was were be been being have has had having do does did doing a an the and',
  'but if or because as until while of at by for with about against between into through during',
  'before after above below to from up down in out on off over under again further then once here',
  'there when where why how all any both each few more most other some such no nor not only own',
  'same so than too very s t can will just don should now',
];

const FREQUENT_WORDS = [
  'one would time year people way day man thing woman life child world school state family',
  'student group country problem hand part place case week company system program question work',
  'government number night point home water room mother area money story fact month lot right',
  'study book eye job word business issue side kind head house service friend father power hour',
  'game line end member law car city community name president team minute idea kid body',
  'information back parent face others level office door health person art war history party',
  'result change morning reason research girl guy moment air teacher force education say get make',
  'go know take see come think look want give use find tell ask seem feel try leave call put mean',
  'keep let begin show hear play run move live believe hold bring happen write provide sit stand',
  'lose pay meet include continue set learn lead understand watch follow stop create speak read',
  'allow add spend grow open walk win offer remember love consider appear buy wait serve die send',
  'expect build stay fall cut reach kill remain suggest raise pass sell require report decide',
  'pull new good first last long great little old big high different small large next early young',
  'important public bad able two three four five six seven eight nine ten hundred thousand',
  'million also like even still many much may might must could shall since later made said used',
  'known found well got without within around another every never always often however although',
  'though upon yet ever',
];

export const COMMON_WORDS: ReadonlySet<string> = new Set([...STOP_WORDS, ...FREQUENT_WORDS].join(' ').split(' '));
