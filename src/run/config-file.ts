/**
 * Reads a run config file: YAML with positions, `--set a.b=c` overrides (values parsed as YAML
 * scalars), validation of every key in one pass, and errors that point at file:line:col.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { type Document, isMap, isPair, isScalar, isSeq, LineCounter, type Node, parse, parseDocument } from 'yaml';
import { ConfigError, type ConfigIssue } from '../rl/config.js';
import { checkRunConfig, type RunConfig } from './run-config.js';

/** A problem with where it is: a file position or the --set flag that caused it. */
export interface LocatedIssue extends ConfigIssue {
  /** "file:line:col", or "--set a.b=c". */
  where: string;
}

/** A config file that cannot be used; every problem is listed, each with its location. */
export class ConfigFileError extends ConfigError {
  override readonly issues: LocatedIssue[];

  constructor(
    readonly file: string,
    issues: LocatedIssue[],
  ) {
    super(issues, file);
    this.issues = issues;
    const n = issues.length;
    this.message = `${file}: ${n} problem${n === 1 ? '' : 's'}\n${issues.map((i) => `  ${i.where}  ${i.path}: ${i.message}`).join('\n')}`;
  }
}

type Segment = string | number;

/** Parses `a.b.0=value` into a key path and a YAML scalar value. */
export function parseSet(expr: string): { path: Segment[]; value: unknown } {
  const eq = expr.indexOf('=');
  if (eq <= 0)
    throw new ConfigFileError('--set', [{ path: '(flag)', where: `--set ${expr}`, message: 'expected key.path=value, e.g. trainer.num_generations=8' }]);
  const path = expr
    .slice(0, eq)
    .split('.')
    .map((k) => (/^\d+$/.test(k) ? Number(k) : k));
  const text = expr.slice(eq + 1);
  try {
    return { path, value: parse(text) ?? null };
  } catch {
    return { path, value: text };
  }
}

/** A run config is a page of YAML; anything this big is a wrong file or an attack. */
export const MAX_CONFIG_BYTES = 1 << 20;
/** Alias expansions allowed when building the config (the yaml package's default, made explicit): stops "billion laughs" anchor bombs. */
export const MAX_YAML_ALIASES = 100;

/** The file's text, or a ConfigFileError: missing, too large, or not UTF-8. */
function readConfigText(file: string): string {
  const fail = (message: string, where = file): never => {
    throw new ConfigFileError(file, [{ path: '(file)', where, message }]);
  };
  if (!existsSync(file)) fail('no such file');
  const size = statSync(file).size;
  if (size > MAX_CONFIG_BYTES) fail(`file is ${size} bytes; a run config is at most ${MAX_CONFIG_BYTES}`);
  const bytes = readFileSync(file);
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return fail('not valid UTF-8 text: save the config as UTF-8');
  }
}

/** Loads, overrides and validates; throws ConfigFileError listing every problem with its position. */
export function loadRunConfig(file: string, sets: readonly string[] = []): { config: RunConfig; raw: Record<string, unknown> } {
  const lineCounter = new LineCounter();
  const doc = parseDocument(readConfigText(file), { lineCounter, prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length) {
    throw new ConfigFileError(
      file,
      doc.errors.map((e) => {
        const { line, col } = lineCounter.linePos(e.pos[0]);
        return { path: '(yaml)', where: `${file}:${line}:${col}`, message: e.message.split('\n')[0] };
      }),
    );
  }
  if (!isMap(doc.contents)) {
    if (doc.contents !== null && doc.contents !== undefined)
      throw new ConfigFileError(file, [{ path: '(root)', where: `${file}:1:1`, message: 'expected a mapping of keys' }]);
    doc.contents = doc.createNode({}) as unknown as typeof doc.contents;
  }
  const overrides = sets.map((s) => ({ expr: s, ...parseSet(s) }));
  for (const o of overrides) doc.setIn(o.path, doc.createNode(o.value));
  let raw: Record<string, unknown>;
  try {
    raw = doc.toJS({ maxAliasCount: MAX_YAML_ALIASES }) as Record<string, unknown>;
  } catch (e) {
    const message = /alias/i.test((e as Error).message)
      ? `too many alias expansions (YAML anchor bomb?): at most ${MAX_YAML_ALIASES} are allowed`
      : `cannot be read as data: ${(e as Error).message}`;
    throw new ConfigFileError(file, [{ path: '(yaml)', where: `${file}:1:1`, message }]);
  }
  const loop = cyclePath(raw);
  if (loop !== null) {
    throw new ConfigFileError(file, [
      {
        path: loop,
        where: `${file}:${position(doc, lineCounter, loop)}`,
        message: 'refers to itself through a YAML alias (&x … *x): a config is a tree, not a loop',
      },
    ]);
  }
  const { config, issues } = checkRunConfig(raw);
  if (config) return { config, raw };
  const located = issues.map((i) => {
    const set = [...overrides].reverse().find((o) => i.path === o.path.join('.') || i.path.startsWith(`${o.path.join('.')}.`));
    return { ...i, where: set ? `--set ${set.expr}` : `${file}:${position(doc, lineCounter, i.path)}` };
  });
  // file order, then --set flags
  const key = (w: string) => (w.startsWith('--set') ? [1e9, 0] : w.split(':').slice(-2).map(Number));
  located.sort((a, b) => key(a.where)[0] - key(b.where)[0] || key(a.where)[1] - key(b.where)[1]);
  throw new ConfigFileError(file, located);
}

/** The dotted key path of the first value that contains itself (a recursive alias), or null. */
function cyclePath(value: unknown, path: string[] = [], open = new Set<object>()): string | null {
  if (typeof value !== 'object' || value === null) return null;
  if (open.has(value)) return path.join('.') || '(root)';
  open.add(value);
  for (const [k, v] of Object.entries(value)) {
    const found = cyclePath(v, [...path, k], open);
    if (found !== null) return found;
  }
  open.delete(value);
  return null;
}

/** line:col of the deepest node on a dotted key path (the key itself when it exists). */
function position(doc: Document, lc: LineCounter, dotted: string): string {
  let node: Node | null = doc.contents as Node | null;
  let offset = node?.range?.[0] ?? 0;
  for (const key of dotted === '(root)' ? [] : dotted.split('.')) {
    if (isMap(node)) {
      const pair = node.items.find((p) => isPair(p) && isScalar(p.key) && String(p.key.value) === key);
      if (!pair) break;
      offset = (pair.key as Node).range?.[0] ?? offset;
      node = pair.value as Node | null;
    } else if (isSeq(node) && /^\d+$/.test(key)) {
      const item = node.items[Number(key)] as Node | undefined;
      if (!item) break;
      offset = item.range?.[0] ?? offset;
      node = item;
    } else break;
  }
  const { line, col } = lc.linePos(offset);
  return `${line}:${col}`;
}
