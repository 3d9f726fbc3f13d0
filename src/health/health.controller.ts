/** Liveness and dependency health: `GET /health`, no auth. */
import { Controller, Get, Inject, Res } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiProperty, ApiServiceUnavailableResponse, ApiTags } from '@nestjs/swagger';
import { InjectDataSource } from '@nestjs/typeorm';
import type { FastifyReply } from 'fastify';
import Redis from 'ioredis';
import { DataSource } from 'typeorm';
import { Public } from '../auth/decorators';
import { withinTimeout } from '../common/timeout';
import { REDIS } from '../redis/redis.module';

class HealthChecks {
  @ApiProperty({ enum: ['up', 'down'] }) database: 'up' | 'down';
  @ApiProperty({ enum: ['up', 'down'] }) redis: 'up' | 'down';
}
class HealthResponse {
  @ApiProperty({ enum: ['ok', 'degraded'] }) status: 'ok' | 'degraded';
  @ApiProperty({ type: HealthChecks }) checks: HealthChecks;
}

const CHECK_TIMEOUT_MS = 2000;

async function probe(check: () => Promise<unknown>): Promise<'up' | 'down'> {
  const ok = await withinTimeout(check().then(() => true), CHECK_TIMEOUT_MS);
  return ok ? 'up' : 'down';
}

@ApiTags('health')
@Controller('health')
export class HealthController {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    @Inject(REDIS) private readonly redis: Redis,
  ) {}

  @Get()
  @Public()
  @ApiOperation({ summary: 'Service and dependency health (no auth)' })
  @ApiOkResponse({ type: HealthResponse })
  @ApiServiceUnavailableResponse({ type: HealthResponse, description: 'A dependency is down' })
  async health(@Res({ passthrough: true }) res: FastifyReply): Promise<HealthResponse> {
    const [database, redis] = await Promise.all([probe(() => this.db.query('SELECT 1')), probe(() => this.redis.ping())]);
    const ok = database === 'up' && redis === 'up';
    res.status(ok ? 200 : 503);
    return { status: ok ? 'ok' : 'degraded', checks: { database, redis } };
  }
}
