import { Body, Controller, Post } from '@nestjs/common';
import { FASTIFY_ROUTE_CONFIG_METADATA } from '@nestjs/platform-fastify/constants';
import { IsArray } from 'class-validator';
import { ItemsController } from '../items/items.controller';
import { PerElementBody } from './body-parsing';
import { Untransformed } from './validation';

class PairedDto {
  @IsArray() @Untransformed()
  items: unknown[];
}

class UnpairedDto {
  @IsArray()
  items: unknown[];
}

describe('@PerElementBody', () => {
  it('takes a route whose @Body() DTO marks the field @Untransformed, and leaves the field\'s elements to the handler', () => {
    @Controller('paired')
    class Paired {
      @Post()
      @PerElementBody('items')
      write(@Body() dto: PairedDto): PairedDto {
        return dto;
      }
    }
    expect(Reflect.getMetadata(FASTIFY_ROUTE_CONFIG_METADATA, Paired.prototype.write)).toEqual({ perElement: 'items' });
  });

  it('refuses, as the route is declared, a DTO field that is not @Untransformed, another field, or a handler without a @Body() DTO', () => {
    expect(() => {
      @Controller('unpaired')
      class Unpaired {
        @Post()
        @PerElementBody('items')
        write(@Body() dto: UnpairedDto): UnpairedDto {
          return dto;
        }
      }
      return Unpaired;
    }).toThrow("@PerElementBody('items') on Unpaired.write needs a @Body() DTO whose items is @Untransformed()");
    expect(() => {
      @Controller('other-field')
      class OtherField {
        @Post()
        @PerElementBody('elements')
        write(@Body() dto: PairedDto): PairedDto {
          return dto;
        }
      }
      return OtherField;
    }).toThrow(/OtherField\.write needs a @Body\(\) DTO whose elements is @Untransformed/);
    expect(() => {
      @Controller('no-body')
      class NoBody {
        @Post()
        @PerElementBody('items')
        write(@Body('items') items: PairedDto): PairedDto {
          return items;
        }
      }
      return NoBody;
    }).toThrow(/NoBody\.write needs a @Body\(\) DTO/);
  });

  it('holds for the service\'s own per-element route, POST /items/bulk: its controller loads', () => {
    expect(Reflect.getMetadata(FASTIFY_ROUTE_CONFIG_METADATA, ItemsController.prototype.bulk)).toEqual({ perElement: 'items' });
  });
});
