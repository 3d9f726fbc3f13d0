/**
 * Search: `GET /search`, PostgreSQL full-text search with relevance, recency, snippets and a
 * typo-tolerant trigram fallback, composed with the `GET /items` filters. The index is kept
 * by a database trigger (migration 1732300000500), so no writer has to know about search.
 * Exports SearchService, whose `matchClause` gives bulk actions the same query engine for
 * their free-text `filter.filter`.
 */
import { Module } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { ItemsModule } from '../items/items.module';
import { SearchController } from './search.controller';
import { SearchService } from './search.service';
import { SearchStatements } from './search-statements';

@Module({
  imports: [ItemsModule],
  controllers: [SearchController],
  providers: [
    SearchService,
    { provide: SearchStatements, useFactory: (config: AppConfig) => new SearchStatements(config.DATABASE_URL, config.SEARCH_DB_POOL_SIZE, config.DATABASE_STATEMENT_TIMEOUT_MS), inject: [AppConfig] },
  ],
  exports: [SearchService],
})
export class SearchModule {}
