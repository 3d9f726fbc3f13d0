import { Global, Module } from '@nestjs/common';
import { Outbox } from './outbox';

/** The outbox alone (outbox.ts), global so every module that writes can record its events. */
@Global()
@Module({ providers: [Outbox], exports: [Outbox] })
export class OutboxModule {}
