/**
 * Regenerates test/dashboard/fixtures/run-coordination/ from a real short run of the tiny model
 * on the coordination game (the files the dashboard reads; no weights). Absolute paths are
 * replaced by placeholders so the fixture does not depend on where it was made.
 *   npx tsx test/dashboard/make-fixture.ts && npx biome format --write test/dashboard/fixtures
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { train } from '../../src/cli/train.js';
import { makeTinyModel } from '../helpers/tiny-model.js';

const out = resolve(import.meta.dirname, 'fixtures', 'run-coordination');
const work = mkdtempSync(join(tmpdir(), 'magrpo-fixture-'));
const model = makeTinyModel({ seed: 1, dir: join(work, 'tiny-model') });
const config = join(work, 'run.yaml');
writeFileSync(
  config,
  `env:
  module: ${resolve(import.meta.dirname, '..', 'cli', 'fixtures', 'coordination-env.ts')}
  options: {items: 16}
model: ${model}
output_dir: ${join(work, 'runs')}
run_name: run-coordination
trainer:
  num_generations: 4
  max_new_tokens: 1
  temperature: 1
  top_k: null
  top_p: 1
  num_train_epochs: 2
  agent_learning_rate: 0.03
  rollout_buffer_size: 1
  early_termination_threshold: null
  logging_steps: 1
  eval_interval: 4
  eval_num_samples: 3
samples:
  every: 2
`,
);
const report = await train(config, { quiet: true });
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
for (const f of ['config.yaml', 'metrics.jsonl', 'samples.jsonl', 'eval.json', 'report.json', 'report.md']) {
  const text = readFileSync(join(report.dir, f), 'utf8').replaceAll(model, '<tiny-model>').replaceAll(work, '<tmp>').replaceAll(resolve('.'), '<repo>');
  writeFileSync(join(out, f), text);
}
rmSync(work, { recursive: true, force: true });
process.stderr.write(`wrote ${out}\n`);
