/**
 * Copies a finished demo run's demo.json into a results folder as seed-<seed>.json (what
 * `magrpo demo --record DIR` does at the end of a run), filling in the training fluency from the
 * run's metrics when the record lacks it. The README tables are built from those files.
 *
 *   npx tsx scripts/record-demo.ts runs/demo-tldr-seed1-xxxx results/demo-tldr
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { trainingFluency } from '../src/run/demo.js';

const [runDir, outDir] = process.argv.slice(2);
if (!runDir || !outDir) {
  process.stderr.write('usage: npx tsx scripts/record-demo.ts <run dir> <results dir>\n');
  process.exit(2);
}
const record = JSON.parse(readFileSync(join(runDir, 'demo.json'), 'utf8'));
record.training_fluency ??= trainingFluency(runDir);
mkdirSync(outDir, { recursive: true });
const file = join(outDir, `seed-${record.seed}.json`);
writeFileSync(file, `${JSON.stringify(record, null, 2)}\n`);
process.stdout.write(`${file}\n`);
