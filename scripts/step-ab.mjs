#!/usr/bin/env node
// Medians (and ranges) per phase of an A/B series of `magrpo bench --step --out` files:
// <dir>/before-<i>.json and <dir>/after-<i>.json, taken alternately (before 1, after 1, before 2, ...)
// so that both sides see the machine's drift alike.
//
//   node scripts/step-ab.mjs bench/step/ab-amx-decode
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.argv[2];
if (!dir) {
  console.error('usage: node scripts/step-ab.mjs <dir with before-*.json and after-*.json>');
  process.exit(2);
}
const side = (name) =>
  readdirSync(dir)
    .filter((f) => f.startsWith(`${name}-`) && f.endsWith('.json'))
    .map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')));
const [before, after] = [side('before'), side('after')];
if (before.length === 0 || after.length === 0) {
  console.error(`${dir}: needs before-*.json and after-*.json`);
  process.exit(1);
}
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const phases = before[0].rows.map((r) => r.phase).filter((p) => p !== 'other');
const cell = (runs, phase) => {
  const xs = runs.map((r) => r.rows.find((x) => x.phase === phase)?.s ?? Number.NaN);
  return `${median(xs).toFixed(2)} (${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)})`;
};
console.log(`${dir}: ${before.length} before and ${after.length} after runs, seconds per item, median (min–max)\n`);
console.log('| phase | before | after |\n| --- | --- | --- |');
for (const p of phases) console.log(`| ${p} | ${cell(before, p)} | ${cell(after, p)} |`);
const rss = (runs) => `${(median(runs.map((r) => r.peak_rss_mb)) / 1024).toFixed(2)} GB`;
console.log(`| peak RSS | ${rss(before)} | ${rss(after)} |`);
