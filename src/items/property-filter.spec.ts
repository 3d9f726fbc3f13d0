import { propertyClauseOf } from './property-filter';

describe('propertyClauseOf', () => {
  it.each([
    ['status=open', { path: ['status'], op: '=', kind: 'string', json: '"open"' }],
    ['status="open"', { path: ['status'], op: '=', kind: 'string', json: '"open"' }],
    ['a.b.0!=3', { path: ['a', 'b', '0'], op: '!=', kind: 'number', json: '3' }],
    ['n>=12345678901234567890', { path: ['n'], op: '>=', kind: 'number', json: '12345678901234567890' }],
    ['n<1e400', { path: ['n'], op: '<', kind: 'number', json: '1e400' }],
    ['n<1E-1000', { path: ['n'], op: '<', kind: 'number', json: '1E-1000' }],
    ['n>=-0.5', { path: ['n'], op: '>=', kind: 'number', json: '-0.5' }],
    ['f=true', { path: ['f'], op: '=', kind: 'boolean', json: 'true' }],
    ['f=null', { path: ['f'], op: '=', kind: 'null', json: 'null' }],
    ['f=', { path: ['f'], op: '=', kind: 'string', json: '""' }],
    // The first operator character starts the operator: the rest is the value.
    ['eq==x', { path: ['eq'], op: '=', kind: 'string', json: '"=x"' }],
    ['t>=<b>', { path: ['t'], op: '>=', kind: 'string', json: '"<b>"' }],
    ['q="unterminated', { path: ['q'], op: '=', kind: 'string', json: '"\\"unterminated"' }],
  ])('%s', (raw, clause) => expect(propertyClauseOf(raw)).toEqual(clause));

  it.each(['status', '=x', '.a=1', 'a.=1', 'a b=1', 'a!x', 'n<true', 'n>null', 'a={"b":1}', 'a=[1]', `${'k.'.repeat(8)}k=1`, `k=${'x'.repeat(1000)}`, 'é=1', 'n<1e1000000', 'n>1e-100000', `n=${'1'.repeat(1001)}`, 'a="\\u0000"', 'a>"\\ud800"', 'a=\ud800'])(
    'refuses %s',
    (raw) => expect(propertyClauseOf(raw)).toBeUndefined(),
  );
});
