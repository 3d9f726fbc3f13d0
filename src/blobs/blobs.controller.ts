import { Controller, Delete, Get, Head, Headers, HttpCode, Param, Post, Query, Req, Res } from '@nestjs/common';
import {
  ApiBody,
  ApiConsumes,
  ApiHeader,
  ApiOkResponse,
  ApiOperation,
  ApiParam,
  ApiResponse,
  ApiTags,
} from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Caller, Requires } from '../auth/decorators';
import { canUpload } from '../auth/permissions';
import type { Principal } from '../auth/principal';
import { ApiError } from '../common/api-error';
import { StreamedBody } from '../common/body-parsing';
import { Uncompressed } from '../common/compression';
import { ApiNotModified, namesEntityTag } from '../common/entity-tags';
import { ByteRange, contentRange, rangeStillApplies, requestedRange, UNSATISFIABLE } from './byte-range';
import { ApiCreatedLocation, setCreatedLocation } from '../common/created-location';
import { ApiErrors } from '../openapi/api-errors.decorator';
import { ApiOAuth } from '../openapi/api-oauth.decorator';
import { ParseBlobHashPipe } from './blob-hash';
import { uploadMediaType } from './blob-media-type';
import { BlobList, BlobResponse, ListBlobsQuery } from './blobs.dto';
import { BlobsService } from './blobs.service';
import { closeAfterResponse } from './lingering-close';

const BLOB_PATH = '/blobs/{hash}';

const HASH_PARAM = { name: 'hash', description: 'SHA-256 of the content: 64 lowercase hex digits, optionally prefixed "sha256:"' };

/** The headers of a download and of its 304 alike (setContentHeaders). */
const CACHE_HEADERS = {
  ETag: { description: 'The quoted hash; content never changes, so If-None-Match gets 304', schema: { type: 'string' } },
  'Cache-Control': { description: 'private, max-age=31536000, immutable', schema: { type: 'string' } },
  'Content-Security-Policy': { description: "default-src 'none'; sandbox: a browser that opens the content runs none of its script", schema: { type: 'string' } },
} as const;

// Content-Type is described by the response's media type (OpenAPI ignores it as a header).
const CONTENT_HEADERS = {
  'Content-Length': { description: 'Size in bytes', schema: { type: 'integer' } },
  'Accept-Ranges': { description: 'bytes: a Range request gets that range (206)', schema: { type: 'string' } },
  ...CACHE_HEADERS,
  'X-Content-Type-Options': { description: 'nosniff', schema: { type: 'string' } },
} as const;

/** GET's and HEAD's answer for a record whose content the store lacks (BlobsService.contentMissing). */
const CONTENT_MISSING: [number, string] = [
  503,
  'The content is missing from the store behind its record (service_unavailable, details.hash): a store lost or restored from an older backup; uploading the same bytes again restores it',
];

function declaredLength(req: FastifyRequest): number | undefined {
  const header = req.headers['content-length'];
  return header !== undefined && /^\d+$/.test(header) ? Number(header) : undefined;
}

@ApiTags('blobs')
@Controller('blobs')
export class BlobsController {
  constructor(private readonly blobs: BlobsService) {}

  @Post()
  @ApiOAuth({ note: 'write on some type (any `<type>:write`).' })
  @StreamedBody()
  @ApiOperation({
    summary: 'Upload a blob',
    description:
      'The raw request body is the content, of any Content-Type (stored and sent back on download; default application/octet-stream; ' +
      'a media type of at most 255 printable ASCII characters: one the HTTP layer cannot parse is 415 invalid_request, any other refused 400 invalid_request). ' +
      'It is streamed, never buffered whole, and named by its SHA-256. Content is stored once per tenant: uploading bytes the tenant ' +
      'already has returns 200 with the existing record. Bodies over BLOB_MAX_BYTES get 413 blob_too_large and the connection is closed. ' +
      'A body sent with Content-Encoding gzip, deflate or br is stored decoded (hashed and sent back as its decoded bytes; the size limit applies to the bytes sent and to the decoded bytes); ' +
      'another Content-Encoding is 415, and bytes that do not decode are 400 invalid_request. ' +
      'Needs an admin credential or write permission on at least one type. Items refer to the blob as "sha256:<hash>" (the `ref` field). ' +
      'An `Idempotency-Key` is not needed and is ignored: the content names the blob, so a retry of the same bytes stores nothing new ' +
      'and answers 200 with the same record (a streamed body is not kept for a replay, nor compared with the first).',
  })
  @ApiConsumes('application/octet-stream', '*/*')
  @ApiBody({ schema: { type: 'string', format: 'binary' } })
  @ApiCreatedLocation(BlobResponse, BLOB_PATH, 'Stored')
  @ApiOkResponse({ type: BlobResponse, description: 'The tenant already had these bytes; nothing new was stored' })
  @ApiErrors(400, 401, 403, [413, 'Body over BLOB_MAX_BYTES (blob_too_large, details.max_bytes); the connection is closed'], 415, 429, [
    503,
    'The store cannot take uploads now: a full disk, a read-only BLOB_DIR (service_unavailable, Retry-After); nothing is stored',
  ])
  async upload(@Caller() caller: Principal, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    try {
      if (!canUpload(caller)) throw ApiError.forbidden('Uploading blobs needs an admin credential or write permission on a type');
      const contentType = uploadMediaType(req.headers['content-type']);
      const { blob, created } = await this.blobs.upload(caller.tenantId, req.raw, contentType, declaredLength(req), req.headers['content-encoding']);
      if (created) setCreatedLocation(reply, BLOB_PATH, { hash: blob.hash });
      await reply.status(created ? 201 : 200).send(blob);
    } catch (err) {
      // A refused body is not read to its end (it may be huge): answer, then end the
      // connection (lingering-close.ts). A small one already received whole needs no close.
      const tooLarge = err instanceof ApiError && err.code === 'blob_too_large';
      if (tooLarge || !req.raw.complete) closeAfterResponse(req.raw, reply);
      throw err;
    }
  }

  // Declared before the GET route, which would otherwise get a HEAD route of Fastify's making.
  @Head(':hash')
  @Uncompressed()
  @ApiOAuth({ note: 'any token of the tenant.' })
  @ApiOperation({ summary: 'Blob headers only: Content-Type, Content-Length, ETag, caching' })
  @ApiParam(HASH_PARAM)
  @ApiHeader({ name: 'If-None-Match', required: false })
  @ApiResponse({ status: 200, description: 'The blob exists', headers: CONTENT_HEADERS })
  @ApiNotModified(CACHE_HEADERS)
  @ApiErrors(400, 401, 404, 429, CONTENT_MISSING)
  async head(
    @Caller() caller: Principal,
    @Param('hash', ParseBlobHashPipe) hash: string,
    @Headers('if-none-match') ifNoneMatch: string | undefined,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const blob = await this.blobs.present(caller.tenantId, hash);
    if (setContentHeaders(ifNoneMatch, reply, blob)) await reply.send();
  }

  @Get(':hash')
  @Uncompressed()
  @ApiOAuth({ note: 'any token of the tenant.' })
  @ApiOperation({
    summary: 'Download a blob',
    description:
      'Streams the bytes with the Content-Type given at upload. `Range: bytes=first-last` (or `first-`, or `-suffix`) asks for one ' +
      'byte range: 206 with Content-Range; past the end, 416 invalid_request with `Content-Range: bytes */size`. Several ranges, ' +
      'or a Range that does not parse, get the whole content; so does an If-Range that is not the ETag (a resumed download of ' +
      'other bytes). If-None-Match is decided first.',
  })
  @ApiParam(HASH_PARAM)
  @ApiHeader({ name: 'If-None-Match', required: false })
  @ApiHeader({ name: 'Range', required: false, description: 'One byte range: bytes=0-1023, bytes=1024-, bytes=-1024' })
  @ApiHeader({ name: 'If-Range', required: false, description: 'The ETag: the range holds only while the content is that one' })
  @ApiResponse({
    status: 200,
    description: 'The content, with the Content-Type given at upload',
    headers: CONTENT_HEADERS,
    content: { '*/*': { schema: { type: 'string', format: 'binary' } } },
  })
  @ApiResponse({
    status: 206,
    description: 'The byte range asked for',
    headers: { ...CONTENT_HEADERS, 'Content-Length': { description: 'Bytes in the range', schema: { type: 'integer' } }, 'Content-Range': { description: 'bytes first-last/size', schema: { type: 'string' } } },
    content: { '*/*': { schema: { type: 'string', format: 'binary' } } },
  })
  @ApiNotModified(CACHE_HEADERS)
  @ApiErrors(400, 401, 404, [416, 'The range starts past the end of the content (invalid_request); Content-Range: bytes */size'], 429, CONTENT_MISSING)
  async download(
    @Caller() caller: Principal,
    @Param('hash', ParseBlobHashPipe) hash: string,
    @Headers('if-none-match') ifNoneMatch: string | undefined,
    @Headers('range') rangeHeader: string | undefined,
    @Headers('if-range') ifRange: string | undefined,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const rangeOf = (blob: BlobResponse): ByteRange | undefined => {
      if (namesEntityTag(ifNoneMatch, entityTag(blob)) || !rangeStillApplies(ifRange, entityTag(blob))) return undefined;
      const range = requestedRange(rangeHeader, blob.size);
      if (range !== UNSATISFIABLE) return range;
      reply.header('Content-Range', contentRange(UNSATISFIABLE, blob.size));
      throw new ApiError(416, 'invalid_request', `The range starts past the end of the content (${blob.size} bytes)`, { size: blob.size });
    };
    const { blob, content, range } = await this.blobs.open(caller.tenantId, hash, rangeOf);
    if (!setContentHeaders(ifNoneMatch, reply, blob, range)) {
      content.destroy();
      return;
    }
    // Should the client go away or the store fail mid-stream, Fastify destroys both streams:
    // the headers are out, so a cut connection is the only honest signal left.
    await reply.send(content);
  }

  @Get()
  @Requires({ admin: true })
  @ApiOperation({
    summary: 'List the tenant\'s blobs (admin), newest first',
    description:
      'Their records (hash, ref, size, content type, creation time), not the bytes; `content_type` keeps those stored with that type. ' +
      'Admin only: a blob is readable by any credential of the tenant that knows its hash, so the list of hashes is not for every credential.',
  })
  @ApiOkResponse({ type: BlobList })
  @ApiErrors(400, 401, 403, 429)
  list(@Caller() caller: Principal, @Query() q: ListBlobsQuery): Promise<BlobList> {
    return this.blobs.list(caller.tenantId, q);
  }

  @Delete(':hash')
  @HttpCode(200)
  @Requires({ admin: true })
  @ApiOperation({
    summary: 'Delete a blob (admin); answers the deleted record',
    description:
      'Removes the tenant\'s record, then its content (another tenant\'s copy of the same bytes is its own and stays); audited `blob.deleted`. ' +
      'Refused with 409 `conflict`, `details`: `{reason: "blob_in_use", items: [up to 10 item ids], item_count}`, while any item of the tenant, ' +
      'in any state (trashed and revoked ones too), refers to it in its properties: change or purge them first. An item write that refers to ' +
      'the blob and runs at the same time is waited for, so no item is left referring to a deleted blob. Revisions do not count: a ' +
      'snapshot in `GET /items/{id}/versions` may name a blob since deleted, whose GET is then 404 `blob_not_found`. ' +
      'Uploading the same bytes again makes the blob anew. Not idempotent by key (no `Idempotency-Key`): a repeated DELETE is 404.',
  })
  @ApiParam(HASH_PARAM)
  @ApiOkResponse({ type: BlobResponse, description: 'The deleted record' })
  @ApiErrors(400, 401, 403, 404, [409, 'Items of the tenant refer to the blob (conflict, details.reason blob_in_use, details.items, details.item_count)'], 429)
  remove(@Caller() caller: Principal, @Param('hash', ParseBlobHashPipe) hash: string): Promise<BlobResponse> {
    return this.blobs.remove(caller, hash);
  }

  @Get(':hash/metadata')
  @ApiOAuth({ note: 'any token of the tenant.' })
  @ApiOperation({ summary: 'Blob metadata: hash, ref, size, content type, creation time' })
  @ApiParam(HASH_PARAM)
  @ApiOkResponse({ type: BlobResponse })
  @ApiErrors(400, 401, 404, 429)
  metadata(@Caller() caller: Principal, @Param('hash', ParseBlobHashPipe) hash: string): Promise<BlobResponse> {
    return this.blobs.get(caller.tenantId, hash);
  }
}

const entityTag = (blob: BlobResponse) => `"${blob.hash}"`;

/**
 * Sets the download headers. Returns false when the client's copy is current (304 sent).
 * Content-Length is the blob's size on HEAD too, where no body follows.
 * `Content-Security-Policy: sandbox` keeps an uploaded HTML or SVG file from running script
 * with the API's origin should a browser open it.
 */
function setContentHeaders(ifNoneMatch: string | undefined, reply: FastifyReply, blob: BlobResponse, range?: ByteRange): boolean {
  const headers = {
    ETag: entityTag(blob),
    'Accept-Ranges': 'bytes',
    'Cache-Control': 'private, max-age=31536000, immutable',
    'X-Content-Type-Options': 'nosniff',
    'Content-Security-Policy': "default-src 'none'; sandbox",
  };
  reply.headers(headers);
  if (namesEntityTag(ifNoneMatch, headers.ETag)) {
    void reply.status(304).send();
    return false;
  }
  reply.header('Content-Type', blob.content_type);
  if (range) {
    reply.headers({ 'Content-Length': String(range.end - range.start + 1), 'Content-Range': contentRange(range, blob.size) }).status(206);
  } else {
    reply.header('Content-Length', String(blob.size)).status(200);
  }
  return true;
}
