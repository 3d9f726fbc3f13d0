import { ApiProperty } from '@nestjs/swagger';
import { PageQuery } from '../common/pagination';
import { TextParam } from '../common/validation';

export class BlobResponse {
  @ApiProperty({ description: 'SHA-256 of the content, 64 lowercase hex digits', pattern: '^[0-9a-f]{64}$' })
  hash: string;

  @ApiProperty({ description: 'The value items use to refer to this blob', example: 'sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08' })
  ref: string;

  @ApiProperty({ type: 'integer', description: 'Size in bytes' })
  size: number;

  @ApiProperty({ description: 'Content-Type given at the first upload of these bytes', example: 'image/png', maxLength: 255 })
  content_type: string;

  @ApiProperty({ format: 'date-time', description: 'When this tenant first stored these bytes' })
  created_at: string;
}

export class BlobList {
  @ApiProperty({ type: [BlobResponse] }) blobs: BlobResponse[];
  @ApiProperty({ type: String, nullable: true }) next_cursor: string | null;
}

export class ListBlobsQuery extends PageQuery {
  @TextParam({ minLength: 1, maxLength: 255, description: 'Only blobs stored with this Content-Type, as given at upload (compared exactly)' })
  content_type?: string;
}
