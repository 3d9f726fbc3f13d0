import { applyDecorators } from '@nestjs/common';
import { ApiProperty, ApiPropertyOptional, OmitType } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsNotEmpty, IsString, ValidateBy } from 'class-validator';
import { ItemResponse, ListItemsQuery } from '../items/items.dto';
import { hasCharLength, IsQueryInt, MaxChars } from '../common/validation';
import { MAX_QUERY_LENGTH, MAX_QUERY_WORDS, queryWordCount } from './search-query';
import { HEADLINE_SOURCE_CHARS } from './snippet';

/** Search text, as `q` takes it and bulk's `filter.filter`: trimmed, then not empty, at most MAX_QUERY_LENGTH characters and MAX_QUERY_WORDS words. */
export const IsSearchText = () =>
  applyDecorators(
    Transform(({ value }) => (typeof value === 'string' ? value.trim() : value)),
    IsString(),
    IsNotEmpty(),
    MaxChars(MAX_QUERY_LENGTH),
    ValidateBy({
      name: 'maxQueryWords',
      validator: {
        validate: (value) => typeof value !== 'string' || !hasCharLength(value, 0, MAX_QUERY_LENGTH) || queryWordCount(value) <= MAX_QUERY_WORDS,
        defaultMessage: (args) => `${args?.property} must hold at most ${MAX_QUERY_WORDS} words`,
      },
    }),
  );

/** `GET /search`: the query text, paging, and every filter of `GET /items` (not its cursor or `sort`: results go by relevance). */
export class SearchQuery extends OmitType(ListItemsQuery, ['limit', 'cursor', 'sort'] as const) {
  @ApiProperty({
    description:
      'Search text (websearch syntax): words are ANDed, `"a phrase"` matches in order, `or` between terms, `-word` excludes; ' +
      'the last plain word also matches as a prefix. When nothing matches, titles and names similar to the words are returned instead. ' +
      `At most ${MAX_QUERY_WORDS} words.`,
    minLength: 1,
    maxLength: MAX_QUERY_LENGTH,
    example: 'pasta "tomato sauce" -meat',
  })
  @IsSearchText()
  q: string;

  @ApiPropertyOptional({ minimum: 1, maximum: 100, default: 20 })
  @IsQueryInt(1, 100)
  limit: number = 20;

  @ApiPropertyOptional({ minimum: 0, maximum: 10000, default: 0 })
  @IsQueryInt(0, 10000)
  offset: number = 0;
}

export class SearchMetadata {
  @ApiProperty() item_id: string;
  @ApiPropertyOptional({ type: [String], description: 'Absent for OAuth tokens without metadata:read' }) tags?: string[];
  @ApiProperty({ type: 'object', additionalProperties: { type: 'object' }, description: 'Only the namespaces the caller may read' })
  extensions: Record<string, Record<string, unknown>>;
}

export class SearchResult {
  @ApiProperty({ type: ItemResponse }) item: ItemResponse;
  @ApiProperty({ type: SearchMetadata }) metadata: SearchMetadata;
  @ApiProperty({
    description:
      'Relevance (0-1): text rank, times a recency boost by the item `timestamp`. Comparable within one query; not across queries or index rebuilds.',
  })
  relevance_score: number;
  @ApiProperty({
    description:
      'Up to two fragments around the matches; item text HTML-escaped, matches in `<mark>`…`</mark>`, no other markup. ' +
      `Cut from the first ${HEADLINE_SOURCE_CHARS.toLocaleString('en-US')} characters of the item text: a match further in gives the opening, unmarked.`,
  })
  snippet_html: string;
  @ApiProperty({ description: 'The same fragments as plain text' })
  snippet: string;
}

export class SearchResponse {
  @ApiProperty({ type: [SearchResult] }) results: SearchResult[];
  @ApiProperty({
    enum: ['text', 'similar'],
    description:
      '`text`: the results match the query. `similar`: nothing did, so these are items whose titles or names hold a word similar to one of the ' +
      'query\'s (typo tolerance), for a "did you mean" rather than exact hits',
  })
  match: 'text' | 'similar';
}
