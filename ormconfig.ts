/**
 * The DataSource the `typeorm` CLI uses (migration:run, migration:revert, migration:show): the
 * one migrations run on at start-up, under the same lock.
 */
import 'reflect-metadata';
import { loadConfig } from './src/config/app-config';
import { MigrationDataSource, migrationDataSourceOptions } from './src/database/data-source-options';

export default new MigrationDataSource(migrationDataSourceOptions(loadConfig()));
