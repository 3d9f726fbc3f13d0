import { Global, Module } from '@nestjs/common';
import { SecretBox } from './secret-box';

/** Encryption at rest (secret-box.ts), for any module that stores a secret it must read back. */
@Global()
@Module({ providers: [SecretBox], exports: [SecretBox] })
export class CryptoModule {}
