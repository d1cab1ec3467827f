#!/usr/bin/env node
// Lists the skipped tests of a run (the JSON lines scripts/skip-reporter.mjs wrote) with the reason
// for each, and the allow-list (test/skip-allowlist.json). With --ci, exits 1 if any skip does not
// carry an id (`[skip: <id>]`, test/helpers/skip.ts) that the allow-list allows now.
//   node scripts/skip-report.mjs [--ci] <skips.jsonl>
import { existsSync, readFileSync } from 'node:fs';
import { relative } from 'node:path';

const args = process.argv.slice(2);
const ci = args.includes('--ci');
const file = args.find((a) => a !== '--ci');
const { allowed } = JSON.parse(readFileSync(new URL('../test/skip-allowlist.json', import.meta.url), 'utf8'));
const allowedNow = (id) => allowed.find((e) => e.id === id && (e.env === undefined || (process.env[e.env] ?? '') !== ''));

const skips =
  file && existsSync(file)
    ? readFileSync(file, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l))
    : null;
if (skips === null) {
  console.log(`== skipped tests: no record (${file ?? 'no file given'})`);
  process.exit(ci ? 1 : 0);
}

const unlisted = [];
console.log(`== skipped tests: ${skips.length}`);
for (const s of skips) {
  const id = /\[skip: ([\w.-]+)\]$/.exec(s.reason)?.[1];
  const ok = id !== undefined && allowedNow(id) !== undefined;
  if (!ok) unlisted.push(s);
  const where = s.file ? relative(process.cwd(), s.file) : '?';
  console.log(`  ${ci && !ok ? 'NOT ALLOWED ' : ''}${where}: ${s.name} — ${s.reason || '(no reason given)'}`);
}
console.log('== skips allowed in CI (test/skip-allowlist.json)');
for (const e of allowed) console.log(`  ${e.id}${e.env ? ` (only with ${e.env} set${process.env[e.env] ? '' : ': not set now'})` : ''}: ${e.reason}`);
if (ci && unlisted.length > 0) {
  console.log(`== ${unlisted.length} skip(s) not allowed in CI: install what they need, or allow them in test/skip-allowlist.json with the reason`);
  process.exit(1);
}
