/**
 * `magrpo bench --step --peers` (src/bench/step-peers.ts): the TL;DR items both sides train on
 * (on the real SmolLM2 when pulled), magrpo's step without the reference's scoring, the table,
 * and the llama.cpp script's switch for quantized GGUF files on AMX Xeons.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { StepBenchReport } from '../../src/bench/step.js';
import { formatPeers, magrpoWithoutReference, type StepPeersReport, tldrPeerItems } from '../../src/bench/step-peers.js';
import { findPullable, pulledPath } from '../../src/model/pull.js';
import { optionalSkip } from '../helpers/skip.js';

const ROOT = join(import.meta.dirname, '..', '..');
const FILE = pulledPath(findPullable('smollm2-135m-instruct') as never);

const row = (phase: string, s: number) => ({ phase, calls: 1, s, kernel_s: s, outside_s: 0, share: 0 });
const magrpo = {
  step_s: 40,
  rows: [
    row('sample/prefill', 5),
    row('sample/decode', 12),
    row('score/reference', 5),
    row('update/forward', 10),
    row('update/backward', 8),
    row('other', 0),
    row('step', 40),
  ],
  reward_means: [0.5, 1.25],
  peak_rss_mb: 10240,
  load_average: { before: [1, 1, 1], after: [2, 2, 2] },
  tokens: { prompt: 300, completion: 512 },
} as unknown as StepBenchReport;

describe('bench --step --peers', () => {
  it('takes the reference scoring out of magrpo’s step for the CoMLRL comparison (CoMLRL has none)', () => {
    assert.equal(magrpoWithoutReference(magrpo), 35);
  });

  it('tables magrpo and each peer, with the ratio, reward means and why a peer did not run', () => {
    const report = {
      model: { given: 'm.gguf' },
      settings: { agents: 2, group: 4, newTokens: 64, loraRank: 16, threads: 2, warmupItems: 1, items: 1 },
      magrpo,
      peers: [
        {
          engine: 'comlrl',
          ok: true,
          s_per_item: 120,
          result: { reward_means: [0.5, 0.75] },
          peak_rss_mb: 4096,
          wall_s: 1,
          load_average: { before: [3, 0, 0], after: [4, 0, 0] },
        },
        { engine: 'trl', ok: false, why: 'not installed', peak_rss_mb: null, wall_s: 0, load_average: { before: [0, 0, 0], after: [0, 0, 0] } },
        { engine: 'llama.cpp', ok: true, sample_tokens_per_s: 200, peak_rss_mb: 512, wall_s: 1, load_average: { before: [1, 0, 0], after: [1, 0, 0] } },
      ],
    } as unknown as StepPeersReport;
    const text = formatPeers(report);
    assert.match(text, /\| magrpo \| 40\.00 \(35\.00 without reference scoring\) \| 1\.00 \| 0\.50, 1\.25 \| 10\.0 GB/);
    assert.match(text, /\| comlrl \| 120\.00 \| 3\.00 \| 0\.50, 0\.75 \| 4\.0 GB \| 3\.0 → 4\.0 \|/);
    assert.match(text, /\| trl \| could not run: not installed/);
    assert.match(text, /\| llama\.cpp b8 sampling \| 200 tokens\/s/);
  });

  it('loads quantized GGUF files without llama.cpp’s extra buffer types when asked (bench_llama.py)', () => {
    const src = readFileSync(join(ROOT, 'scripts', 'bench_llama.py'), 'utf8');
    assert.match(src, /--no-extra-bufts/);
    assert.match(src, /mp\.use_extra_bufts = False/);
  });

  const skip = optionalSkip('smollm2', !existsSync(FILE) && `no ${FILE} (npm start's setup, or magrpo pull smollm2-135m-instruct)`);
  it('gives both sides the TL;DR training items whose chat prompts fit 400 tokens, as magrpo renders them', { skip }, () => {
    const { items } = tldrPeerItems(FILE, 4, 400);
    assert.equal(items.length, 4);
    for (const it of items) {
      assert.equal(it.prompts.length, 2);
      for (let a = 0; a < 2; a++) {
        assert.ok(it.ids[a].length <= 400 && it.ids[a].length > 50, `${it.ids[a].length} tokens`);
        assert.match(it.prompts[a], /<\|im_start\|>user\n/);
        assert.match(it.prompts[a], /<\|im_start\|>assistant\n$/);
        assert.equal(it.messages[a][0].role, 'user');
      }
      assert.match(it.prompts[0], /concise summary/);
      assert.match(it.prompts[1], /detailed summary/);
    }
    const small = tldrPeerItems(FILE, 2, 300);
    assert.ok(small.items.every((it) => it.ids.every((x) => x.length <= 300)));
  });
});
