/**
 * pass@1 of every shipped model on the real HumanEval (164 problems, data/humaneval), reported
 * however low it is: these are 0.07-6 M-parameter models trained on a few dozen million tokens.
 *
 * Each problem: prompt = BOS + HumanEval's prompt without its final newline (the tokenizer merges
 * a newline with the indentation after it), one greedy completion of at most 256 tokens (fewer when
 * the context is shorter; a prompt that leaves fewer than 64 tokens is skipped and counted), stopped
 * at HumanEval's stop strings. It passes when prompt + completion + the problem's `check` function
 * + `check(entry_point)` exits 0 in the Python sandbox (10 s of CPU).
 *
 *   npx tsx scripts/humaneval-models.ts [models/base ...]    # writes results/humaneval/<model>.json
 */
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { loadHumanEval } from '../src/envs/coding/data.js';
import { LanguageModel } from '../src/model/pretrained.js';
import { CODE_STOP_STRINGS } from '../src/pretrain/code-eval.js';
import { machineRecord } from '../src/run/demo.js';
import { PythonSandbox } from '../src/sandbox/index.js';

const MAX_NEW = 256;
const MIN_NEW = 64;
const OUT = join('results', 'humaneval');

async function evaluate(dir: string) {
  const lm = LanguageModel.load(dir);
  const bos = lm.tokenizer.bosId === null ? '' : lm.tokenizer.decode([lm.tokenizer.bosId]);
  const problems = loadHumanEval();
  const sandbox = new PythonSandbox({ wallSeconds: 20, cpuSeconds: 10 });
  const t0 = performance.now();
  const rows: { task_id: string; completion: string | null; passed: boolean; skipped: boolean }[] = [];
  for (const p of problems) {
    const prompt = p.prompt.replace(/\n$/, '');
    const room = lm.model.maxPositions - lm.encode(bos + prompt).length;
    if (room < MIN_NEW) {
      rows.push({ task_id: p.task_id, completion: null, passed: false, skipped: true });
      continue;
    }
    const [out] = lm.sample([bos + prompt], { maxNewTokens: Math.min(MAX_NEW, room), temperature: 0, stopStrings: CODE_STOP_STRINGS, rng: 0 });
    const program = `${prompt}${out.text}\n\n\n${p.test}\n\ncheck(${p.entry_point})\n`;
    const r = await sandbox.run(program);
    rows.push({ task_id: p.task_id, completion: out.text, passed: r.exitCode === 0, skipped: false });
  }
  const passed = rows.filter((r) => r.passed).length;
  const skipped = rows.filter((r) => r.skipped).length;
  return {
    model: dir,
    problems: problems.length,
    skipped_context: skipped,
    passed,
    pass_at_1: passed / problems.length,
    decoding: { temperature: 0, max_new_tokens: MAX_NEW, stop: CODE_STOP_STRINGS },
    wall_s: (performance.now() - t0) / 1000,
    machine: machineRecord(),
    passed_ids: rows.filter((r) => r.passed).map((r) => r.task_id),
    completions: rows,
  };
}

const dirs = process.argv.slice(2).length > 0 ? process.argv.slice(2) : readdirSync('models').map((m) => join('models', m));
mkdirSync(OUT, { recursive: true });
for (const dir of dirs) {
  const result = await evaluate(dir);
  const file = join(OUT, `${basename(dir)}.json`);
  writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
  console.log(
    `${dir}: pass@1 ${(100 * result.pass_at_1).toFixed(1)}% (${result.passed}/${result.problems}; ${result.skipped_context} skipped for context) -> ${file}`,
  );
}
process.exit(0);
