/**
 * Reading EXPLAIN (ANALYZE, FORMAT JSON) plans in tests that guard a statement's cost by its
 * shape (rows read), never by its time.
 */
export interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  Plans?: PlanNode[];
}

/** Rows a plan's scans of `table` read, kept or filtered out. */
export function rowsRead(node: PlanNode, table: string): number {
  const here = node['Relation Name'] === table ? (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0)) * node['Actual Loops'] : 0;
  return here + (node.Plans ?? []).reduce((n, p) => n + rowsRead(p, table), 0);
}

/** How many scans of `table` a plan has. */
export function scans(node: PlanNode, table: string): number {
  return (node['Relation Name'] === table ? 1 : 0) + (node.Plans ?? []).reduce((n, p) => n + scans(p, table), 0);
}

/** Index entries a plan's bitmap index scans of `index` read. */
export function entriesRead(node: PlanNode, index: RegExp): number {
  const here = node['Node Type'] === 'Bitmap Index Scan' && index.test(node['Index Name'] ?? '') ? node['Actual Rows'] * node['Actual Loops'] : 0;
  return here + (node.Plans ?? []).reduce((n, p) => n + entriesRead(p, index), 0);
}
