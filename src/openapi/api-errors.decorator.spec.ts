import { ApiErrors } from './api-errors.decorator';

/** Where @nestjs/swagger keeps a method's responses (its DECORATORS.API_RESPONSE, not exported). */
const API_RESPONSE = 'swagger/apiResponse';

class Documented {
  @ApiErrors(400, [413, 'Over BLOB_MAX_BYTES (blob_too_large, details.max_bytes)'])
  upload(): void {}
}

describe('ApiErrors', () => {
  const responses = () => Reflect.getMetadata(API_RESPONSE, Documented.prototype.upload) as Record<string, { description: string }>;

  it('documents a status with the pipeline\'s description', () => {
    expect(responses()['400'].description).toMatch(/validation_error/);
  });

  it('lets a route give its own description of a status, as the blob upload does of its 413', () => {
    expect(responses()['413'].description).toBe('Over BLOB_MAX_BYTES (blob_too_large, details.max_bytes)');
  });
});
