/**
 * One markdown row per method of each demo record (`magrpo demo --record`): the return and the
 * faithfulness measures of the real-model writing demo, for result folders whose records are not
 * seeds of one configuration (the README's tables come from scripts/readme-results.ts).
 *
 *   npx tsx scripts/result-rows.ts results/demo-tldr-smollm2-tuning/*.json
 */
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';

import { FAITHFULNESS_COLUMNS } from './readme-results.js';

/** The README section's faithfulness columns, less the reward's components, echo and agent 1's length. */
const LEFT_OUT = new Set(['structure', 'coherence', 'consistency', 'echo', 'words/agent_1']);
const COLUMNS = FAITHFULNESS_COLUMNS.filter(([k]) => !LEFT_OUT.has(k));
const METHODS = ['trained pair (MAGRPO)', 'untrained pair'];

const files = process.argv.slice(2);
if (files.length === 0) throw new Error('usage: npx tsx scripts/result-rows.ts <record.json>...');
console.log(`| record | method | ${COLUMNS.map(([, h]) => h).join(' | ')} | best baseline |`);
console.log(`| --- | --- |${' --- |'.repeat(COLUMNS.length + 1)}`);
for (const file of files) {
  const r = JSON.parse(readFileSync(file, 'utf8')) as { rows: { method: string; metrics: Record<string, number> }[] };
  const baselines = r.rows.filter((x) => !METHODS.includes(x.method));
  const best = baselines.reduce((a, b) => (b.metrics.return > a.metrics.return ? b : a));
  for (const m of METHODS) {
    const row = r.rows.find((x) => x.method === m);
    if (!row) continue;
    const cells = COLUMNS.map(([k]) => (row.metrics[k] === undefined ? '-' : row.metrics[k].toFixed(k.startsWith('ref_nll') ? 2 : 1)));
    const tail = m === METHODS[0] ? `${best.method} ${best.metrics.return.toFixed(1)}` : '';
    console.log(`| ${basename(file, '.json')} | ${m} | ${cells.join(' | ')} | ${tail} |`);
  }
}
