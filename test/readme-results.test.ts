/** The README's result tables are exactly what the committed result files give. */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { GENERATED_FILES, renderReadme, renderSection } from '../scripts/readme-results.js';

test('README.md and docs/reward-hacking.md match results/ (regenerate: npx tsx scripts/readme-results.ts)', () => {
  const readme = readFileSync('README.md', 'utf8');
  assert.ok(readme.includes('<!-- results:demo-tldr -->'), 'the README has a generated demo-tldr section');
  for (const file of GENERATED_FILES.filter((f) => existsSync(f))) {
    const text = readFileSync(file, 'utf8');
    assert.equal(text, renderReadme(text), `${file} is out of date`);
  }
});

type Row = { method: string; metrics: Record<string, number>; examples?: string[][] };

/** A demo record as `magrpo demo --record` writes it, on a made-up machine. */
function writeRecord(root: string, section: string, env: string, seed: number, rows: Row[]): void {
  const machine = { cpu: 'Test CPU', isa: 'avx2', blas_core: 'Haswell', threads: 2, commit: 'abc1234' };
  writeFileSync(join(root, 'results', section, `seed-${seed}.json`), JSON.stringify({ env, seed, wall_s: 600, overrides: [], machine, rows }));
}

test('a section shows mean and min–max over seeds, machine and examples', () => {
  const root = mkdtempSync(join(tmpdir(), 'magrpo-results-'));
  try {
    mkdirSync(join(root, 'results/demo-tldr'), { recursive: true });
    for (const [seed, ret] of [
      [1, 60],
      [2, 70],
    ] as const) {
      writeRecord(root, 'demo-tldr', 'tldr', seed, [
        { method: 'trained pair (MAGRPO)', metrics: { return: ret, word_validity: 70 }, examples: [['short one', 'long one']] },
        { method: 'untrained pair', metrics: { return: 20, word_validity: 72 }, examples: [['a', 'b']] },
      ]);
    }
    const md = renderSection('demo-tldr', root);
    assert.ok(md.includes('| trained pair (MAGRPO) | **65.0 (60.0–70.0)** |'), md);
    assert.ok(md.includes('| untrained pair | 20.0 (20.0–20.0) |'), md);
    assert.ok(md.includes('Test CPU (avx2; OpenBLAS core Haswell, 2 thread(s))'));
    assert.ok(md.includes('[item 1, agent 1] long one'));
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('the real-model section: its own legend, the lead seed by seed, and at most six items quoted', () => {
  const root = mkdtempSync(join(tmpdir(), 'magrpo-results-'));
  try {
    mkdirSync(join(root, 'results/demo-tldr-smollm2'), { recursive: true });
    for (const [seed, trained, single] of [
      [1, 55, 48],
      [2, 42, 45],
    ] as const) {
      const examples = Array.from({ length: 9 }, (_, i) => [`short ${i + 1}`, `long ${i + 1}`]);
      writeRecord(root, 'demo-tldr-smollm2', 'tldr-smollm2', seed, [
        { method: 'trained pair (MAGRPO)', metrics: { return: trained, 'content_support/agent_0': 46 }, examples },
        { method: 'single_agent', metrics: { return: single, 'content_support/agent_0': 20 } },
        { method: 'untrained pair', metrics: { return: 35, 'content_support/agent_0': 37 }, examples },
      ]);
    }
    const md = renderSection('demo-tldr-smollm2', root);
    assert.ok(md.includes('| support a0 |'), md);
    assert.ok(md.includes('Support is the share (%)'), 'the faithfulness legend');
    assert.ok(!md.includes('Word validity is'), 'not the fluency legend');
    assert.ok(md.includes('seed 1 +7.00 (over single_agent, 48.0); seed 2 −3.00 (over single_agent, 45.0)'), md);
    assert.ok(md.includes('first 6 eval items') && md.includes('[item 6, agent 1] long 6') && !md.includes('[item 7,'), md);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
