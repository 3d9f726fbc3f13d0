/** Item properties' validation errors (ajv's) as the API's field issues: which property is missing, which is invalid and why. */
import { ErrorObject } from 'ajv';

/** ajv's instancePath (a JSON pointer into the properties) as a dotted field name, `key` below it appended. */
function fieldAt(instancePath: string, key?: string): string {
  const names = instancePath.split('/').slice(1).map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
  return [...names, ...(key === undefined ? [] : [key])].join('.');
}

/** Turns ajv's errors into field issues: which property (`''`: the properties as a whole), and what is wrong with it. */
export function propertyIssues(errors: ErrorObject[]): { missing: string[]; invalid: Array<{ field: string; message: string }> } {
  const missing: string[] = [];
  const invalid: Array<{ field: string; message: string }> = [];
  for (const e of errors) {
    if (e.keyword === 'required') {
      missing.push(fieldAt(e.instancePath, e.params.missingProperty));
    } else if (e.keyword !== 'allOf') {
      // additionalProperties and propertyNames are reported at the object holding the key, and
      // so are the failures of a key under propertyNames' schema: the field at fault is that key.
      const key = e.keyword === 'additionalProperties' ? e.params.additionalProperty : e.keyword === 'propertyNames' ? e.params.propertyName : e.propertyName;
      const message = e.message ?? 'is invalid';
      invalid.push({
        field: fieldAt(e.instancePath, key),
        message: e.keyword !== 'propertyNames' && e.propertyName !== undefined ? `property name ${message}` : message,
      });
    }
  }
  // A subtype's schema and its parent's (in `allOf`) can both report one problem.
  const seen = new Set<string>();
  return { missing: [...new Set(missing)], invalid: invalid.filter((i) => !seen.has(`${i.field}\n${i.message}`) && seen.add(`${i.field}\n${i.message}`)) };
}

/**
 * The same as the API's `details.fields`, each named as an item write names it
 * (`properties.<field>`, `properties` for the whole): required ones first ("is required").
 */
export function propertyFieldIssues(issues: ReturnType<typeof propertyIssues>): Array<{ field: string; message: string }> {
  const at = (field: string) => (field === '' ? 'properties' : `properties.${field}`);
  return [...issues.missing.map((field) => ({ field: at(field), message: 'is required' })), ...issues.invalid.map((i) => ({ field: at(i.field), message: i.message }))];
}
