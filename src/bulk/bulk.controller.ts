import { Body, Controller, Delete, Get, Param, Post, Query, Res } from '@nestjs/common';
import { ApiAcceptedResponse, ApiExtraModels, ApiOkResponse, ApiOperation, ApiTags, getSchemaPath } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Caller } from '../auth/decorators';
import type { Principal } from '../auth/principal';
import { ParseIdPipe } from '../common/ids';
import { Idempotent } from '../idempotency/idempotent.decorator';
import { ApiErrors } from '../openapi/api-errors.decorator';
import { ApiOAuth } from '../openapi/api-oauth.decorator';
import { BulkActionDto, BulkJobDto, BulkJobList, BulkResultDto, ListBulkJobsQuery } from './bulk.dto';
import { BulkService } from './bulk.service';

@ApiTags('bulk actions')
@ApiExtraModels(BulkResultDto, BulkJobDto)
@Controller('items/bulk_action')
export class BulkController {
  constructor(private readonly bulk: BulkService) {}

  @Post()
  @ApiOAuth({ note: 'write on the types of the items it changes (`<type>:write`), `metadata:write` to change tags; `purge` needs an admin API key.' })
  @Idempotent()
  @ApiOperation({
    summary: 'Apply one action to every item a filter matches',
    description:
      '`dry_run` answers the matched ids and count (200). Otherwise, with `async: true` or a match set larger than BULK_SYNC_MAX ' +
      '(default 1000) the action runs as a background job: 202 with the job (status `queued`) and a Location to poll; else it runs ' +
      'at once in one transaction: 200 with the result. Per-item failures (`invalid_transition`, `invalid_properties`, …) are listed in ' +
      '`errors`; the other items succeed. Each changed item gets a new version and revision, as a PATCH would. `purge` is admin-only ' +
      'and needs `confirm: "PURGE"`. A member\'s match set is narrowed to the types it may write. A tenant may have ' +
      'BULK_JOBS_MAX_UNFINISHED_PER_TENANT (default 10) jobs queued or running; another job is 429 `rate_limited` with Retry-After ' +
      'until one ends (dry runs and direct runs are not counted).',
  })
  @ApiOkResponse({ type: BulkResultDto, description: 'Dry run, or the action done directly' })
  @ApiAcceptedResponse({
    type: BulkJobDto,
    description: 'A job was started; poll GET /items/bulk_action/jobs/{id}',
    headers: { Location: { description: 'The job: /items/bulk_action/jobs/{id}', schema: { type: 'string' } } },
  })
  @ApiErrors(400, 401, 403, 429)
  async submit(@Caller() caller: Principal, @Body() dto: BulkActionDto, @Res({ passthrough: true }) res: FastifyReply): Promise<BulkResultDto | BulkJobDto> {
    const outcome = await this.bulk.submit(caller, dto);
    if ('result' in outcome) {
      res.status(200);
      return outcome.result;
    }
    res.status(202).header('Location', `/items/bulk_action/jobs/${outcome.job.id}`);
    return outcome.job;
  }

  @Get('jobs')
  @ApiOAuth({ note: 'the jobs started by the token\'s grant or client, with no scope the token lacks.' })
  @ApiOperation({
    summary: 'Bulk jobs, newest first: the caller\'s own (an admin: the tenant\'s), with cursor pagination',
    description: 'Ended jobs are listed for BULK_JOB_RETENTION_DAYS (default 30) after they ended.',
  })
  @ApiOkResponse({ type: BulkJobList })
  @ApiErrors(400, 401, 429)
  list(@Caller() caller: Principal, @Query() q: ListBulkJobsQuery): Promise<BulkJobList> {
    return this.bulk.list(caller, q);
  }

  @Get('jobs/:id')
  @ApiOAuth({ note: 'a job started by the token\'s grant or client, with no scope the token lacks.' })
  @ApiOperation({
    summary: 'A bulk job: status, progress counters, and its result once ended',
    description: 'An ended job (completed, failed, cancelled) is kept BULK_JOB_RETENTION_DAYS (default 30) after it ended, then deleted (404).',
  })
  @ApiOkResponse({ schema: { $ref: getSchemaPath(BulkJobDto) } })
  @ApiErrors(400, 401, 403, 404, 429)
  get(@Caller() caller: Principal, @Param('id', ParseIdPipe) id: string): Promise<BulkJobDto> {
    return this.bulk.get(caller, id);
  }

  @Delete('jobs/:id')
  @ApiOAuth({ note: 'a job started by the token\'s grant or client, with no scope the token lacks.' })
  @ApiOperation({
    summary: 'Cancel a bulk job',
    description:
      'A queued job is cancelled at once, and so is a started one no worker holds (its workers stopped, died or stalled past its lease). A running one stops between chunks, typically within seconds; until then the answer shows it ' +
      'in_progress with `cancel_requested: true`. An ended job is answered as it is (200). Allowed for the credential that started it, or an admin.',
  })
  @ApiOkResponse({ type: BulkJobDto })
  @ApiErrors(400, 401, 403, 404, 429)
  cancel(@Caller() caller: Principal, @Param('id', ParseIdPipe) id: string): Promise<BulkJobDto> {
    return this.bulk.cancel(caller, id);
  }
}
