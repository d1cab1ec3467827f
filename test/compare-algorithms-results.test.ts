/** results/algorithms/README.md's table is exactly what the committed result files give. */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ALGORITHMS, type AlgoResult, budgetOf, README, renderReadme, renderTable } from '../scripts/compare-algorithms.js';

test('results/algorithms/README.md matches results/algorithms/*.json (regenerate: npx tsx scripts/compare-algorithms.ts --table)', () => {
  const text = readFileSync(README, 'utf8');
  assert.ok(text.includes('<!-- compare-algorithms:table -->'), 'the README has a generated table');
  assert.equal(text, renderReadme(text), `${README} is out of date`);
});

test('every compared config has the same budget of sampled summaries', () => {
  const budgets = ALGORITHMS.map((a) => budgetOf(a.config));
  for (const b of budgets) assert.equal(b.posts * b.per_post_per_writer * b.writers, budgets[0].summaries);
  assert.ok(budgets.every((b) => b.summaries === budgets[0].summaries && b.posts === budgets[0].posts));
});

test('the table shows mean and min–max over seeds, the machine, the budget and samples', () => {
  const dir = mkdtempSync(join(tmpdir(), 'magrpo-compare-'));
  try {
    for (const [algo, seed, ret] of [
      ['magrpo', 1, 60],
      ['magrpo', 2, 70],
      ['iac', 1, 50],
      ['iac', 2, 55],
    ] as const) {
      const r: AlgoResult = {
        algo,
        label: algo === 'magrpo' ? 'MAGRPO' : 'IAC',
        seed,
        config: `configs/compare/${algo}.yaml`,
        command: `npx tsx src/cli/main.ts train configs/compare/${algo}.yaml -q --set trainer.seed=${seed}`,
        status: 'finished',
        budget: { posts: 10, per_post_per_writer: 8, writers: 2, policies: 2, summaries: 160, how: 'G = 4 × 2 epochs' },
        settings: {},
        wall_s: 120,
        train_s: 60,
        eval_s: 10,
        eval_items: 16,
        metrics: { return: ret, word_validity: 80 },
        reward_mean: 1,
        examples: [[`short ${algo}`, 'long one']],
        machine: {
          cpu_model: 'Test CPU',
          logical_cpus: 2,
          isa: 'avx2',
          blas_core: 'Haswell',
          threads: 2,
          commit: 'abc1234',
          loadavg_before: [0.5, 0, 0],
          loadavg_after: [1.5, 0, 0],
        },
      };
      writeFileSync(join(dir, `${algo}-seed${seed}.json`), JSON.stringify(r));
    }
    const md = renderTable(dir);
    assert.ok(md.includes('| MAGRPO | 1, 2 | 65.0 (60.0–70.0) | 80.0 (80.0–80.0) |'), md);
    assert.ok(md.includes('| IAC | 1, 2 | 52.5 (50.0–55.0) |'), md);
    assert.ok(md.includes('IAC below every MAGRPO seed'), md);
    assert.ok(md.includes('10 training posts × 8 sampled summaries per writer and post × 2 writers = 160 summaries'), md);
    assert.ok(md.includes('Test CPU (2 logical CPUs'), md);
    assert.ok(md.includes('load average (1 min) 0.50–1.50'), md);
    assert.ok(md.includes('[post 1, writer 0] short iac'), md);
    // The block is replaced in place, the prose around it kept.
    const readme = `# Title\n\nprose\n\n<!-- compare-algorithms:table -->\nold\n<!-- /compare-algorithms:table -->\n\nmore prose\n`;
    const next = renderReadme(readme, dir);
    assert.ok(next.startsWith('# Title\n\nprose\n\n<!-- compare-algorithms:table -->\n| algorithm'));
    assert.ok(next.endsWith('<!-- /compare-algorithms:table -->\n\nmore prose\n'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
