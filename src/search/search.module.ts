/**
 * Search: `GET /search`, PostgreSQL full-text search with relevance, recency, snippets and a
 * typo-tolerant trigram fallback, composed with the `GET /items` filters. The index is kept
 * by a database trigger (migration 1732300000500), so no writer has to know about search.
 * Exports SearchService, whose `matchClause` gives bulk actions the same query engine for
 * their free-text `filter.filter`.
 */
import { Module } from '@nestjs/common';
import { ItemsModule } from '../items/items.module';
import { SearchController } from './search.controller';
import { SearchService } from './search.service';

@Module({ imports: [ItemsModule], controllers: [SearchController], providers: [SearchService], exports: [SearchService] })
export class SearchModule {}
