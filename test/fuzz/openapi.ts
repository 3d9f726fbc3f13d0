/**
 * Reads the service's own OpenAPI 3.1 document into the list of operations the fuzzer drives
 * (every path × method, with its path, query and header parameters and its request body), and
 * resolves `$ref`s, so that new routes are fuzzed without anyone touching the fuzzer.
 */

export type Schema = Record<string, any>;

export interface Param {
  name: string;
  in: 'path' | 'query' | 'header' | 'cookie';
  required: boolean;
  schema: Schema;
}

export interface Operation {
  method: string; // upper case
  path: string; // the template, e.g. /items/{id}
  id: string; // "POST /items"
  params: Param[];
  body?: { required: boolean; mediaTypes: string[]; schema?: Schema; schemaName?: string };
  /** How the operation answers errors (`x-error-format`): the SPEC envelope unless it says otherwise. */
  errorFormat: 'envelope' | 'oauth' | 'html';
  /** Whether the operation ignores query parameters it does not declare (`x-unknown-query: ignored`). */
  ignoresUnknownQuery: boolean;
}

export interface OpenApiDoc {
  openapi: string;
  paths: Record<string, Record<string, any>>;
  components?: { schemas?: Record<string, Schema> };
}

const METHODS = ['get', 'head', 'post', 'put', 'patch', 'delete', 'options', 'trace'];

export function refName(schema: Schema | undefined): string | undefined {
  const ref = schema?.$ref;
  return typeof ref === 'string' ? ref.split('/').pop() : undefined;
}

/** Follows `$ref`s (to components only, which is all @nestjs/swagger emits). */
export function resolve(doc: OpenApiDoc, schema: Schema | undefined): Schema {
  let s = schema ?? {};
  for (let hops = 0; typeof s.$ref === 'string' && hops < 20; hops++) {
    const name = refName(s)!;
    s = doc.components?.schemas?.[name] ?? {};
  }
  return s;
}

/** The schema with every `$ref` inlined (for ajv); cycles are cut off at a depth. */
export function inline(doc: OpenApiDoc, schema: Schema | undefined, depth = 0): Schema {
  return inlineValue(doc, schema ?? {}, depth) as Schema;
}

function inlineValue(doc: OpenApiDoc, v: unknown, depth: number): unknown {
  if (!v || typeof v !== 'object') return v; // `required` lists, enums, literals
  if (depth > 12) return {};
  if (Array.isArray(v)) return v.map((x) => inlineValue(doc, x, depth + 1));
  const s = resolve(doc, v as Schema);
  const out: Schema = {};
  for (const [k, x] of Object.entries(s)) out[k] = inlineValue(doc, x, depth + 1);
  return out;
}

export function operations(doc: OpenApiDoc): Operation[] {
  const ops: Operation[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    const shared: any[] = item.parameters ?? [];
    for (const m of METHODS) {
      const op = item[m];
      if (!op) continue;
      const params: Param[] = [...shared, ...(op.parameters ?? [])].map((p) => ({
        name: p.name,
        in: p.in,
        required: Boolean(p.required) || p.in === 'path',
        schema: resolve(doc, p.schema),
      }));
      let body: Operation['body'];
      if (op.requestBody) {
        const content: Record<string, any> = op.requestBody.content ?? {};
        const mediaTypes = Object.keys(content);
        const json = content['application/json'];
        body = {
          required: Boolean(op.requestBody.required),
          mediaTypes,
          schema: json ? resolve(doc, json.schema) : undefined,
          schemaName: json ? refName(json.schema) : undefined,
        };
      }
      ops.push({ method: m.toUpperCase(), path, id: `${m.toUpperCase()} ${path}`, params, body, errorFormat: op['x-error-format'] ?? 'envelope', ignoresUnknownQuery: op['x-unknown-query'] === 'ignored' });
    }
  }
  return ops;
}
