/** The DataSource the `typeorm` CLI uses (migration:run, migration:revert, migration:show). */
import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { loadConfig } from './src/config/app-config';
import { dataSourceOptions } from './src/database/data-source-options';

export default new DataSource(dataSourceOptions(loadConfig()));
