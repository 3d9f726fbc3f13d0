/** Conditional GETs: whether a request's If-None-Match names an answer's entity tag, and the 304 that answers it. */

import { ApiResponse } from '@nestjs/swagger';

/** RFC 9110 8.8.3: an entity tag is an optional `W/` and a quoted opaque part, which may hold commas. */
const ENTITY_TAG = /(?:W\/)?"([^"]*)"/g;

/**
 * RFC 9110 13.1.2: weak comparison (`W/"x"` and `"x"` match), `*` for any. Whatever
 * Cache-Control the request carries: its `no-cache` is addressed to caches, not to the origin,
 * and fetch() adds it to every request with a conditional header.
 */
export function namesEntityTag(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  if (header.trim() === '*') return true;
  const wanted = opaqueParts(etag)[0];
  return wanted !== undefined && opaqueParts(header).includes(wanted);
}

function opaqueParts(list: string): string[] {
  return Array.from(list.matchAll(ENTITY_TAG), (match) => match[1]);
}

/** The 304 of a conditional GET in the OpenAPI document, with the headers it repeats. */
export const ApiNotModified = (headers: Parameters<typeof ApiResponse>[0]['headers']) => ApiResponse({ status: 304, description: 'Not modified (If-None-Match matched)', headers });
