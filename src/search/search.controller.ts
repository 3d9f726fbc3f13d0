import { Controller, Get, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Caller } from '../auth/decorators';
import type { Principal } from '../auth/principal';
import { ApiErrors } from '../openapi/api-errors.decorator';
import { ApiOAuth } from '../openapi/api-oauth.decorator';
import { SearchQuery, SearchResponse } from './search.dto';
import { SearchService } from './search.service';

@ApiTags('search')
@Controller('search')
export class SearchController {
  constructor(private readonly search: SearchService) {}

  @Get()
  @ApiOAuth({ note: 'finds items of the types the token may read (`<type>:read`); without `metadata:read` results come without `tags`, a `tags` filter is 403, and text matches ignore tags.' })
  @ApiOperation({
    summary: 'Full-text search over the tenant\'s items',
    description:
      'Searches every string property (nested ones too) except those whose type schema marks them `"searchable": false`, plus tags. ' +
      'Weights: `title`/`name` highest, then `description` and tags, then `body`, then everything else. The score is the text rank ' +
      'times a recency boost by the item `timestamp` (half-life `SEARCH_RECENCY_HALF_LIFE_DAYS`, default 30 days; 0 turns it off). ' +
      'Results are ordered by score, then id, so limit/offset pages neither overlap nor skip. When the text matches nothing, titles and ' +
      'names similar to the query words are returned instead (typo tolerance). The filters are those of `GET /items` and compose with ' +
      'the query; items of types the caller may not read are never returned. Missing or empty `q`, `limit` outside 1-100 or `offset` ' +
      'outside 0-10000 give 400 validation_error.',
  })
  @ApiOkResponse({ type: SearchResponse })
  @ApiErrors(400, 401, 403, 429)
  find(@Caller() caller: Principal, @Query() q: SearchQuery): Promise<SearchResponse> {
    return this.search.search(caller, q);
  }
}
