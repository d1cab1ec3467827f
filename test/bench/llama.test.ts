/**
 * llama.cpp in `magrpo bench`: the bench models written as GGUF (F32 and F16; GPT-2 as llama.cpp's
 * gpt2; a model the exporter cannot write refused with the reason), llama.cpp reading the 1m file
 * and a GPT-2-shaped one as the same models (their logits are magrpo's), and
 * scripts/bench_llama.py's JSON report on tiny settings; the sample-only table rows. The parts
 * that need llama.cpp are skipped, with the reason printed, when no Python here imports llama_cpp.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { LlamaBench, type LlamaReport, llamaArgs, sampleOnlyRows, sampleThroughput, writeSizeGguf } from '../../src/bench/llama.js';
import { SIZES, type SizeSpec } from '../../src/bench/models.js';
import { findPeers, type Peer, pypiCandidates } from '../../src/bench/peers.js';
import { Rng } from '../../src/engine/rng.js';
import { noGrad } from '../../src/engine/tensor.js';
import { ggufUnsupported } from '../../src/model/gguf.js';
import { parseModelConfig } from '../../src/model/hf-config.js';
import { createModel } from '../../src/model/load.js';
import { llamaLogits } from '../helpers/llama-cpp.js';
import { optionalSkip } from '../helpers/skip.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const script = join(root, 'scripts', 'bench_llama.py');
const tmp = mkdtempSync(join(tmpdir(), 'magrpo-bench-llama-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

/** The first interpreter the bench would look in that imports llama_cpp. */
const llamaPython = ['/usr/bin/python3', ...pypiCandidates(root)].find(
  (py) => spawnSync(py, ['-c', 'import llama_cpp'], { encoding: 'utf8', timeout: 60_000 }).status === 0,
);
const skip = optionalSkip('llama', llamaPython === undefined && 'llama_cpp is not importable by any Python the bench looks in (pip install llama-cpp-python)');
if (skip) console.log(`# bench-llama: skipping the llama.cpp tests: ${skip}`);

/** Test-scale sizes next to the bench's: GPT-2-shaped, and one the exporter refuses (sliding window). */
const TEST_SIZES: Record<string, SizeSpec> = {
  'tiny-gpt2': {
    label: 'GPT-2-shaped, L2 C32 H4 V96 ctx 64',
    hf: { model_type: 'gpt2', vocab_size: 96, n_embd: 32, n_layer: 2, n_head: 4, n_positions: 64, layer_norm_epsilon: 1e-5 },
  },
  'tiny-swa': {
    label: 'Mistral-shaped with a sliding window',
    hf: {
      model_type: 'mistral',
      vocab_size: 64,
      hidden_size: 16,
      intermediate_size: 32,
      num_hidden_layers: 1,
      num_attention_heads: 2,
      num_key_value_heads: 1,
      max_position_embeddings: 64,
      sliding_window: 32,
    },
  },
};
Object.assign(SIZES, TEST_SIZES);
after(() => {
  for (const k of Object.keys(TEST_SIZES)) delete SIZES[k];
});

/** Last-position logits of `ids` through llama.cpp (llama.cpp's defaults, 1 thread), from a GGUF file. */
const lastLogits = (file: string, ids: number[]) => llamaLogits(llamaPython as string, file, ids).logits.at(-1) ?? [];

describe('bench models as GGUF', () => {
  let files: Record<'f32' | 'f16', string> | undefined;
  const written = () => {
    if (files === undefined) {
      const r = writeSizeGguf('1m', tmp);
      assert.ok('files' in r);
      files = r.files;
    }
    return files;
  };

  it('writes the 1m model as F32 and F16 files (F16 about half the size)', () => {
    const files = written();
    const f32 = statSync(files.f32).size;
    const f16 = statSync(files.f16).size;
    assert.ok(f32 > 4 * 1_000_000, `${f32} bytes for 1.0M parameters in F32`);
    assert.ok(f16 < 0.55 * f32, `${f16} bytes in F16`);
  });

  it("writes GPT-2 sizes as llama.cpp's gpt2 (124m's config passes the exporter; a GPT-2 at test scale is written)", () => {
    assert.equal(ggufUnsupported(parseModelConfig(SIZES['124m'].hf)), null);
    const r = writeSizeGguf('tiny-gpt2', tmp);
    assert.ok('files' in r);
    for (const file of Object.values(r.files)) assert.ok(readFileSync(file).includes('gpt2.block_count'), file);
  });

  it('says why a size the exporter cannot write is not written instead of faking it', () => {
    const r = writeSizeGguf('tiny-swa', tmp);
    assert.ok('why' in r);
    assert.match(r.why, /GGUF exporter.*sliding-window/);
  });

  it('llama.cpp loads the 1m and the GPT-2-shaped files as the same models: their logits are magrpo’s (F32 and F16 weights)', { skip }, () => {
    for (const size of ['1m', 'tiny-gpt2']) {
      const r = size === '1m' ? { files: written() } : writeSizeGguf(size, tmp);
      assert.ok('files' in r);
      const model = createModel(parseModelConfig(SIZES[size].hf));
      model.initialize(new Rng(0));
      const V = model.vocabSize;
      const ids = [5, 17, 30, V - 1, 9, 0];
      const ours = noGrad(() => model.forward(Int32Array.from(ids), 1, ids.length).data).slice((ids.length - 1) * V);
      for (const [w, tol] of [
        ['f32', 2e-3],
        ['f16', 5e-3],
      ] as const) {
        const theirs = lastLogits(r.files[w], ids);
        assert.equal(theirs.length, V, `${size} ${w}`);
        let worst = 0;
        for (let i = 0; i < V; i++) worst = Math.max(worst, Math.abs(theirs[i] - ours[i]));
        assert.ok(worst < tol, `${size} ${w}: largest logit difference ${worst}`);
      }
    }
  });

  it('scripts/bench_llama.py prints one JSON report with positive timings per batch', { skip }, () => {
    const files = written();
    // The bench's arguments, on 2 and 3 sequences of 4 new tokens.
    const args = llamaArgs(script, files.f16, 1, { min: 2, max: 2, seconds: 0 });
    args[args.indexOf('--sample-batches') + 1] = '2,3';
    args[args.indexOf('--new-tokens') + 1] = '4';
    const r = spawnSync(llamaPython as string, args, { encoding: 'utf8', timeout: 300_000 });
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '') as LlamaReport;
    assert.equal(out.params, 1000576);
    assert.ok(out.peak_rss_mb > 0);
    assert.match(out.llama_cpp_version ?? '', /^\d+\.\d+/);
    assert.deepEqual(Object.keys(out.sample), ['2', '3']);
    for (const t of Object.values(out.sample)) {
      assert.equal(t.wall.length, 2);
      assert.ok(t.wall.every((s) => s > 0) && t.cpu.every((s) => s >= 0));
    }
    const contexts = (out.settings?.contexts ?? {}) as Record<string, Record<string, number>>;
    const ctx = contexts['3'];
    assert.equal(ctx.n_seq_max, 3);
    assert.equal(ctx.n_threads, 1);
    assert.equal(ctx.n_threads_batch, 1);
    assert.ok(ctx.n_ctx_seq >= 16 + 4);
  });
});

describe('llama.cpp as a bench peer', () => {
  it('is runnable when found, with f32 and f16 weights each in its own and a passive-wait variant', { skip }, () => {
    const peer = findPeers('/usr/bin/python3', root, 2, { PATH: process.env.PATH }).find((p) => p.id === 'llama.cpp');
    assert.ok(peer?.runnable && peer.python);
    assert.deepEqual(
      peer.variants.map((v) => [v.weights, v.env]),
      [
        ['f32', {}],
        ['f32', { OMP_WAIT_POLICY: 'passive' }],
        ['f16', {}],
        ['f16', { OMP_WAIT_POLICY: 'passive' }],
      ],
    );
  });

  it('one row per weight type with the best of its settings, train "—", magrpo ÷ llama.cpp; sizes it cannot run say why', () => {
    const report = (s8: number, s32: number): LlamaReport => ({
      params: 10,
      peak_rss_mb: 50,
      sample: { 8: { wall: [(8 * 64) / s8], cpu: [1] }, 32: { wall: [(32 * 64) / s32], cpu: [1] } },
    });
    assert.deepEqual(sampleThroughput([report(100, 200)]).sample_tokens_per_s, { 8: 100, 32: 200 });
    // The runner's bookkeeping, with a fake child in place of Python.
    const peer: Peer = {
      id: 'llama.cpp',
      name: 'llama.cpp (test)',
      found: true,
      runnable: true,
      python: 'python3',
      variants: [
        { label: 'f32 weights', env: {}, weights: 'f32' },
        { label: 'f32 weights, passive', env: { X: '1' }, weights: 'f32' },
        { label: 'f16 weights', env: {}, weights: 'f16' },
      ],
    };
    const runs: string[][] = [];
    const llama = LlamaBench.create([peer], root, {
      threads: 2,
      reps: { min: 1, max: 1, seconds: 0 },
      env: {},
      log: () => {},
      run: (_cmd, args, env) => {
        runs.push(args);
        const f16 = args[2].endsWith('f16.gguf');
        return env.X ? report(400, 100) : f16 ? report(300, 300) : report(200, 200);
      },
    });
    assert.ok(llama);
    const jobs = llama.prepare('1m');
    assert.equal(jobs.length, 3);
    for (const job of jobs) job();
    assert.ok(runs.every((a) => a[0] === script && a.includes('--threads') && existsSync(a[2])));
    const res = llama.results('1m');
    const f32 = res.sample_peers?.['llama.cpp f32'];
    assert.deepEqual(f32?.sample_tokens_per_s, { 8: 400, 32: 200 }, 'best of its two settings per batch');
    assert.deepEqual(f32?.best_variant.sample, { 8: 'f32 weights, passive', 32: 'f32 weights' });
    assert.deepEqual(res.sample_peers?.['llama.cpp f16']?.sample_tokens_per_s, { 8: 300, 32: 300 });

    const rows = sampleOnlyRows(
      res,
      { sample_tokens_per_s: { 8: 800, 32: 600 } },
      (tps) => tps.toFixed(0),
      (c) => c.join('|'),
    );
    assert.deepEqual(rows, ['|llama.cpp f32|—|400 2.00x|200 3.00x|50', '|llama.cpp f16|—|300 2.67x|300 2.00x|50']);

    assert.deepEqual(llama.prepare('tiny-swa'), []);
    const not = llama.results('tiny-swa');
    assert.equal(not.sample_peers, undefined);
    assert.match(not.peers_not_run?.['llama.cpp'] ?? '', /sliding-window/);
    assert.match(sampleOnlyRows(not, { sample_tokens_per_s: {} }, String, (c) => c.join('|'))[0], /llama\.cpp {2}could not run this size: .*sliding-window/);
  });
});
