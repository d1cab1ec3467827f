#!/usr/bin/env node
// Architecture budget checks (style brief rules 1, 4, 12):
//  - floors: a module never imports from a floor above its own, and imports are acyclic;
//  - size: architecture files stay readable (≤ 400 lines), every source file ≤ 700 lines;
//  - comments: no TODO/FIXME without an issue number, no commented-out code (rule 11).
// Prints a line-count table (like tinygrad's sz.py) with --sz, and source files that have no
// test file of the same path under test/ with --untested.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const FLOORS = {
  engine: 0,
  sandbox: 0,
  data: 0,
  plot: 0,
  text: 0,
  model: 1,
  rollout: 1,
  pretrain: 2,
  rl: 2,
  envs: 3,
  serve: 3,
  run: 4,
  cli: 5,
  dashboard: 5,
  bench: 5,
};
const ARCH_FILES = /^src\/model\/(llama|gpt2)\.ts$/;
const ARCH_CAP = 400;
const FILE_CAP = 700;

const files = [];
(function walk(d) {
  for (const f of readdirSync(d)) {
    const p = join(d, f);
    if (statSync(p).isDirectory()) walk(p);
    else if (p.endsWith('.ts')) files.push(p);
  }
})('src');

const floorOf = (f) => {
  const top = relative('src', f).split('/')[0];
  return top.endsWith('.ts') ? 5 : FLOORS[top];
};
const problems = [];
const graph = new Map();
const sizes = [];
for (const f of files) {
  const text = readFileSync(f, 'utf8');
  const lines = text.split('\n').length;
  sizes.push([f, lines]);
  if (ARCH_FILES.test(f) && lines > ARCH_CAP) problems.push(`${f}: ${lines} lines > ${ARCH_CAP} (architecture files must stay readable)`);
  if (lines > FILE_CAP) problems.push(`${f}: ${lines} lines > ${FILE_CAP}`);
  if (floorOf(f) === undefined)
    problems.push(`${f}: folder is not a known floor (${Object.keys(FLOORS).join(', ')}); add it to scripts/check-layers.mjs and docs/layout.md`);
  for (const [n, line] of text.split('\n').entries()) {
    if (/\b(TODO|FIXME|XXX)\b/.test(line) && !/#\d+/.test(line)) problems.push(`${f}:${n + 1}: TODO without an issue number (write "TODO(#12): ...")`);
    if (/^\s*\/\/\s*(const|let|var|import|export|return|if|for|while|await)\b.*[;{)]\s*$/.test(line)) problems.push(`${f}:${n + 1}: commented-out code`);
  }
  const deps = [];
  for (const m of text.matchAll(/^\s*(?:import|export)\s[^'"]*?from\s+['"](\.[^'"]+)['"]/gm)) {
    const target = resolve(dirname(f), m[1]).replace(/\.js$/, '.ts');
    const rel = relative(process.cwd(), target);
    deps.push(rel);
    if (floorOf(rel) > floorOf(f)) problems.push(`${f} imports ${rel}: upward import (floor ${floorOf(f)} → ${floorOf(rel)})`);
  }
  graph.set(f, deps);
}
// cycle detection (type-only imports count too: they still couple the modules)
const state = new Map();
const stack = [];
function visit(f) {
  state.set(f, 1);
  stack.push(f);
  for (const d of graph.get(f) ?? []) {
    if (state.get(d) === 1) problems.push(`import cycle: ${[...stack.slice(stack.indexOf(d)), d].join(' → ')}`);
    else if (!state.has(d)) visit(d);
  }
  stack.pop();
  state.set(f, 2);
}
for (const f of files) if (!state.has(f)) visit(f);

if (process.argv.includes('--sz')) {
  sizes.sort((a, b) => b[1] - a[1]);
  for (const [f, n] of sizes) console.log(`${String(n).padStart(6)}  ${f}`);
  console.log(`${String(sizes.reduce((s, [, n]) => s + n, 0)).padStart(6)}  total (${sizes.length} files)`);
}
if (process.argv.includes('--untested')) {
  const untested = files.filter((f) => {
    const base = f.replace(/^src\//, 'test/').replace(/\.ts$/, '');
    return !existsSync(`${base}.test.ts`) && !existsSync(base);
  });
  console.log(`${untested.length} source files without test/<same path>.test.ts:\n${untested.join('\n')}`);
}
if (problems.length) {
  console.error(problems.join('\n'));
  process.exit(1);
}
console.log(`layers ok: ${files.length} modules, no upward imports, no cycles, size budgets met`);
