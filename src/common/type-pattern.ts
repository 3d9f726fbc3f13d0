/**
 * The one matcher for dotted names against patterns, used by permissions, item filters,
 * webhook type filters and OAuth scopes.
 *
 *   `*`          matches every name
 *   `a.b.*`      matches `a.b` itself and every name below it (`a.b.c`, `a.b.c.d`), and, for
 *                item types, every subtype of those whatever its name (SPEC 5.4: `parent.*`
 *                covers the type and its subtypes), through the type's `ancestors`
 *   `a.b`        matches exactly `a.b`
 */

/** An item type as patterns see it: its name and its parent chain, nearest first. */
export interface TypeRef {
  name: string;
  ancestors: readonly string[];
}
export const NAME_SEGMENT = '[a-z0-9][a-z0-9_-]*';
export const DOTTED_NAME_RE = new RegExp(`^${NAME_SEGMENT}(\\.${NAME_SEGMENT})*$`);
export const PATTERN_RE = new RegExp(`^(\\*|${NAME_SEGMENT}(\\.${NAME_SEGMENT})*(\\.\\*)?)$`);

export function isDottedName(name: string): boolean {
  return name.length <= 200 && DOTTED_NAME_RE.test(name);
}

export function isPattern(pattern: string): boolean {
  return pattern.length <= 200 && PATTERN_RE.test(pattern);
}

export function matchesPattern(pattern: string, name: string | TypeRef): boolean {
  if (pattern === '*') return true;
  const ref = typeof name === 'string' ? { name, ancestors: [] } : name;
  if (pattern.endsWith('.*')) {
    const base = pattern.slice(0, -2);
    const under = (n: string) => n === base || n.startsWith(base + '.');
    return under(ref.name) || ref.ancestors.some(under);
  }
  return pattern === ref.name;
}

/**
 * How specific a pattern is: exact names beat wildcards, longer prefixes beat shorter ones.
 * Used so that `{"*": "read", "core.note": "write"}` means what it reads as.
 */
export function specificity(pattern: string): number {
  if (pattern === '*') return 0;
  const wildcard = pattern.endsWith('.*');
  // Count the named segments only, so `a.b.*` (which also matches `a.b`) ranks below `a.b`.
  const segments = (wildcard ? pattern.slice(0, -2) : pattern).split('.').length;
  return wildcard ? segments * 2 - 1 : segments * 2;
}

/**
 * How closely a pattern fits a type, as a tuple compared in order: a pattern that matches the
 * type's own name fits better than one that matches only through an ancestor, a nearer
 * ancestor better than a farther one, and then the more specific pattern. Undefined when the
 * pattern does not match. So `{"acme.*": "read", "core.*": "write"}` gives `acme.recipe` (a
 * subtype of `core.note`) read, whatever the names' spelling or order.
 */
function fit(pattern: string, ref: TypeRef): [number, number, number] | undefined {
  if (pattern === '*') return [0, 0, 0];
  const base = pattern.endsWith('.*') ? pattern.slice(0, -2) : undefined;
  const matches = (n: string) => (base === undefined ? n === pattern : n === base || n.startsWith(base + '.'));
  if (matches(ref.name)) return [2, 0, specificity(pattern)];
  if (base === undefined) return undefined;
  const nearest = ref.ancestors.findIndex(matches);
  return nearest === -1 ? undefined : [1, -nearest, specificity(pattern)];
}

/** The pattern in `patterns` that best matches `name` (see `fit`), or undefined. */
export function bestMatch(patterns: Iterable<string>, name: string | TypeRef): string | undefined {
  const ref = typeof name === 'string' ? { name, ancestors: [] } : name;
  let best: { pattern: string; fit: [number, number, number] } | undefined;
  for (const pattern of patterns) {
    const f = fit(pattern, ref);
    if (f && (!best || (f[0] - best.fit[0] || f[1] - best.fit[1] || f[2] - best.fit[2]) > 0)) best = { pattern, fit: f };
  }
  return best?.pattern;
}

/**
 * What `bestMatch` picks for a name without ancestors (an extension namespace, an edge type),
 * asking `has` for the few patterns that could match rather than trying every pattern: the name
 * itself, then `name.*` and each shorter prefix's `.*`, then `*`, in that order of specificity.
 * A permission map of 200 patterns read against an item of thousands of namespaces costs
 * lookups, not their product.
 */
export function bestMatchOfName(has: (pattern: string) => boolean, name: string): string | undefined {
  if (has(name)) return name;
  for (let base = name; ; ) {
    if (has(`${base}.*`)) return `${base}.*`;
    const dot = base.lastIndexOf('.');
    if (dot < 0) break;
    base = base.slice(0, dot);
  }
  return has('*') ? '*' : undefined;
}

/** A name pattern as SQL conditions (for names without lineage, such as edge types). */
export function patternToSql(pattern: string): { exact?: string; prefix?: string; all?: true } {
  if (pattern === '*') return { all: true };
  if (pattern.endsWith('.*')) return { exact: pattern.slice(0, -2), prefix: pattern.slice(0, -1) };
  return { exact: pattern };
}
