/** The DataSource the `typeorm` CLI uses (migration:run, migration:revert, migration:show): the one migrations run on at start-up. */
import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { loadConfig } from './src/config/app-config';
import { migrationDataSourceOptions } from './src/database/data-source-options';

export default new DataSource(migrationDataSourceOptions(loadConfig()));
