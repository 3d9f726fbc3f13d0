/**
 * The RE2 engines tenant `pattern`s run on, and how a pattern is weighed.
 *
 * re2-wasm gives each loaded copy of its module one heap of a fixed 16 MiB that never grows;
 * it frees a compiled RE2 only when told to, and after one failed allocation (an "abort ...
 * OOM") it refuses every later call. With the one copy `require('re2-wasm')` shares, a tenant's
 * patterns could fill that heap and leave pattern validation broken for every tenant until
 * restart. So each engine here loads a copy of its own: within it one compiled RE2 serves every
 * schema using the same pattern, and an engine that has taken in its budget's worth of patterns,
 * or has aborted, is replaced whole by a fresh one, its heap going to the garbage collector with
 * the last validator that used it. Nothing is freed piecemeal: a validator compiled by ajv holds
 * its RE2s for as long as it lives, so freeing one under it would break it.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { RE2 } from 're2-wasm';

/**
 * What a pattern costs, roughly in proportion to the program RE2 compiles it to (which is both
 * the time compiling takes and the heap it keeps): a literal counts 1; `.`, `\W`, `\D`, `\S`
 * count 10, and so do a negated class and each member of a class (a character or a range) past
 * ASCII (in UTF-8 they match sequences of bytes); a Unicode property class (`\p{…}`) counts
 * 2000; a counted repetition multiplies what it repeats by its upper bound. Measured on
 * re2-wasm: 1000 units take about 15-25 ms to compile and 35-70 KB of heap (`\p{L}` alone some
 * 45 ms; `\p{L}{50}`, 100,000 units, over a second and 2 MB).
 */
export const REGEX_COST = { literal: 1, wide: 10, unicodeProperty: 2000 } as const;

export function regexCost(source: string): number {
  let at = 0;
  const repeat = /\{(\d+)(,(\d*))?\}/y;
  const alternation = (): number => {
    let total = sequence();
    while (source[at] === '|') {
      at++;
      total += sequence();
    }
    return total;
  };
  const sequence = (): number => {
    let total = 0;
    while (at < source.length && source[at] !== '|' && source[at] !== ')') {
      let cost = atom();
      for (;;) {
        if (source[at] === '*' || source[at] === '+' || source[at] === '?') {
          at++;
          continue;
        }
        repeat.lastIndex = at;
        const counted = source[at] === '{' ? repeat.exec(source) : null;
        if (!counted) break;
        at = repeat.lastIndex;
        // {n,} compiles to n copies and a star.
        cost *= Math.max(1, counted[3] ? Number(counted[3]) : Number(counted[1]) + (counted[2] ? 1 : 0));
      }
      total += cost;
    }
    return total;
  };
  const escape = (): number => {
    const c = source[at++];
    if (c === 'p' || c === 'P') {
      if (source[at] === '{') {
        const end = source.indexOf('}', at);
        at = end < 0 ? source.length : end + 1;
      } else at++;
      return REGEX_COST.unicodeProperty;
    }
    return c === 'W' || c === 'D' || c === 'S' ? REGEX_COST.wide : REGEX_COST.literal;
  };
  // A class reaching past ASCII compiles each of its members (a character or a range) that
  // does to UTF-8 sequences of bytes: each is as wide as `.`; a negated class at least once.
  const charClass = (): number => {
    let cost = REGEX_COST.literal;
    const negated = source[at] === '^';
    if (negated) at++;
    let wideMembers = 0;
    // One end of a member, past ASCII or not: a character, an escape, \uXXXX, \xXX or \x{…}.
    const end = (): boolean => {
      const c = source[at++];
      if (c !== '\\') return c.charCodeAt(0) > 0x7f;
      if (source[at] === 'u' || source[at] === 'x') {
        const code = source[at] === 'u' ? /\{([0-9A-Fa-f]+)\}|([0-9A-Fa-f]{4})/y : /\{([0-9A-Fa-f]+)\}|([0-9A-Fa-f]{2})/y;
        code.lastIndex = at + 1;
        const m = code.exec(source);
        at = m ? code.lastIndex : at + 1;
        return !m || parseInt(m[1] ?? m[2], 16) > 0x7f;
      }
      const inner = escape();
      if (inner > REGEX_COST.literal) cost += inner;
      return false;
    };
    while (at < source.length && source[at] !== ']') {
      let wide = end();
      if (source[at] === '-' && at + 1 < source.length && source[at + 1] !== ']') {
        at++;
        wide = end() || wide;
      }
      if (wide) wideMembers++;
    }
    at++;
    return negated || wideMembers ? cost + REGEX_COST.wide * Math.max(1, wideMembers) : cost;
  };
  const atom = (): number => {
    const c = source[at++];
    if (c === '(') {
      // (?:…, (?=…, (?!…, (?<=…, (?<!…, (?<name>…, (?P<name>…, (?flags) and (?flags:…
      if (source[at] === '?') {
        at++;
        if (source[at] === '<' && (source[at + 1] === '=' || source[at + 1] === '!')) at += 2;
        else if (source[at] === '<' || source[at] === 'P') at = source.indexOf('>', at) + 1 || source.length;
        else {
          while (/[A-Za-z-]/.test(source[at] ?? '')) at++;
          if (source[at] === ':' || source[at] === '=' || source[at] === '!') at++;
        }
      }
      const cost = alternation();
      at++;
      return cost;
    }
    if (c === '[') return charClass();
    if (c === '\\') return escape();
    return c === '.' ? REGEX_COST.wide : REGEX_COST.literal;
  };
  let total = 0;
  // A stray `)` (refused when the pattern compiles) must not end the weighing early.
  while (at < source.length) total += alternation() + (source[at++] === ')' ? REGEX_COST.literal : 0);
  return total;
}

/**
 * What one engine takes in before it is replaced, in regexCost units: some 3-7 MiB of its heap
 * (the rest of whose 16 MiB is stack, and RE2's match-time caches).
 */
const ENGINE_BUDGET = 100_000;

const RE2_DIR = path.dirname(require.resolve('re2-wasm/package.json'));
const GLUE_FILE = path.join(RE2_DIR, 'build', 'wasm', 're2.js');
const CLASS_FILE = path.join(RE2_DIR, 'build', 'src', 're2.js');
// This project's `lib` has no WebAssembly types (they come with "DOM"): the little used here.
declare const WebAssembly: {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { exports: object };
};
let sources: { glue: string; cls: string; wasm: object } | undefined;

/** Evaluates a CommonJS file of re2-wasm afresh, so that its module state is this engine's alone. */
function evaluate(source: string, file: string, requireFn: (id: string) => unknown, moduleObject: Record<string, unknown>): Record<string, any> {
  const cjs = { exports: {} as Record<string, any> };
  new Function('exports', 'require', 'module', '__filename', '__dirname', 'Module', source)(
    cjs.exports, requireFn, cjs, file, path.dirname(file), moduleObject,
  );
  return cjs.exports;
}

export class RegexEngine {
  private readonly RE2: typeof RE2;
  private readonly compiled = new Map<string, RE2 | Error>();
  private load = 0;
  /** Set once the module has aborted: every later call into it would fail. */
  broken = false;

  constructor() {
    sources ??= {
      glue: readFileSync(GLUE_FILE, 'utf8'),
      cls: readFileSync(CLASS_FILE, 'utf8'),
      wasm: new WebAssembly.Module(readFileSync(path.join(RE2_DIR, 'build', 'wasm', 're2.wasm'))),
    };
    const { glue, cls, wasm } = sources;
    // Emscripten's options object: reuse the compiled wasm, and learn of an abort (whose message,
    // handled here, would otherwise go to stderr).
    const emscripten: Record<string, unknown> = {
      instantiateWasm: (imports: object, receive: (instance: object, module: object) => void) => {
        const instance = new WebAssembly.Instance(wasm, imports);
        receive(instance, wasm);
        return instance.exports;
      },
      onAbort: () => {
        this.broken = true;
      },
      printErr: () => undefined,
    };
    evaluate(glue, GLUE_FILE, require, emscripten);
    this.RE2 = evaluate(cls, CLASS_FILE, (id) => (id === '../wasm/re2' ? emscripten : require(id)), {}).RE2;
  }

  /** Whether the next compile should start a fresh engine. */
  get spent(): boolean {
    return this.broken || this.load > ENGINE_BUDGET;
  }

  /**
   * ajv's `code.regExp`: one compiled RE2 per (pattern, flags) in this engine, and one refusal:
   * a pattern RE2 refuses leaves a little of the heap behind too, so its error is kept and
   * repeated rather than the pattern compiled again. RE2 needs `u`.
   */
  regExp(pattern: string, flags: string): RE2 {
    const unicode = flags.includes('u') ? flags : `${flags}u`;
    const key = `${unicode}/${pattern}`;
    let re = this.compiled.get(key);
    if (!re) {
      this.load += regexCost(pattern);
      try {
        re = new this.RE2(pattern, unicode);
      } catch (err) {
        re = err as Error;
      }
      this.compiled.set(key, re);
    }
    if (re instanceof Error) throw re;
    return re;
  }
}
