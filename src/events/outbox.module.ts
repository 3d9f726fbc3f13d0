import { Global, Module } from '@nestjs/common';
import { BookkeepingDb } from '../database/bookkeeping-db';
import { Outbox } from './outbox';

/**
 * The outbox (outbox.ts), global so every module that writes can record its events, and the
 * pool the relay and the webhook deliveries keep their records with (bookkeeping-db.ts).
 */
@Global()
@Module({ providers: [Outbox, BookkeepingDb], exports: [Outbox, BookkeepingDb] })
export class OutboxModule {}
