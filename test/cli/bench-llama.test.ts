/**
 * llama.cpp in `magrpo bench`: the bench models written as GGUF (F32 and F16; GPT-2 refused with
 * the reason), llama.cpp reading the 1m file as the same model (its logits are magrpo's), and
 * scripts/bench_llama.py's JSON report on tiny settings; the sample-only table rows. The parts
 * that need llama.cpp are skipped, with the reason printed, when no Python here imports llama_cpp.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { LlamaBench, type LlamaReport, llamaArgs, sampleOnlyRows, sampleThroughput, writeSizeGguf } from '../../src/cli/bench-llama.js';
import { SIZES } from '../../src/cli/bench-models.js';
import { findPeers, type Peer, pypiCandidates } from '../../src/cli/bench-peers.js';
import { Rng } from '../../src/engine/rng.js';
import { noGrad } from '../../src/engine/tensor.js';
import { parseModelConfig } from '../../src/model/config.js';
import { createModel } from '../../src/model/load.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const script = join(root, 'scripts', 'bench_llama.py');
const tmp = mkdtempSync(join(tmpdir(), 'magrpo-bench-llama-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

/** The first interpreter the bench would look in that imports llama_cpp. */
const llamaPython = ['/usr/bin/python3', ...pypiCandidates(root)].find(
  (py) => spawnSync(py, ['-c', 'import llama_cpp'], { encoding: 'utf8', timeout: 60_000 }).status === 0,
);
const skip = llamaPython === undefined ? 'llama_cpp is not importable by any Python the bench looks in (pip install llama-cpp-python)' : false;
if (skip) console.log(`# bench-llama: skipping the llama.cpp tests: ${skip}`);

/** Last-position logits of `ids` through llama.cpp (one sequence, 1 thread), from a GGUF file. */
function llamaLogits(file: string, ids: number[]): number[] {
  const code = `
import ctypes, json, sys
import llama_cpp as L
import numpy as np
keep = L.llama_log_callback(lambda level, text, user: None)
L.llama_log_set(keep, ctypes.c_void_p(0))
L.llama_backend_init()
ids = json.loads(sys.argv[2])
model = L.llama_model_load_from_file(sys.argv[1].encode(), L.llama_model_default_params())
assert model, "load failed"
p = L.llama_context_default_params()
p.n_ctx, p.n_batch, p.n_threads, p.n_threads_batch = 64, 64, 1, 1
ctx = L.llama_init_from_model(model, p)
b = L.llama_batch_init(len(ids), 0, 1)
for i, t in enumerate(ids):
    b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = t, i, 1, i == len(ids) - 1
    b.seq_id[i][0] = 0
b.n_tokens = len(ids)
assert L.llama_decode(ctx, b) == 0
V = L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))
print(json.dumps(np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, -1), shape=(V,)).tolist()))`;
  const r = spawnSync(llamaPython as string, ['-c', code, file, JSON.stringify(ids)], { encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '[]');
}

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

  it('says why GPT-2 (124m) cannot be written instead of faking it', () => {
    const r = writeSizeGguf('124m', tmp);
    assert.ok('why' in r);
    assert.match(r.why, /GGUF exporter.*Llama-family.*gpt2/);
  });

  it('llama.cpp loads the 1m file as the same model: its logits are magrpo’s (F32 and F16 weights)', { skip }, () => {
    const files = written();
    const model = createModel(parseModelConfig(SIZES['1m'].hf));
    model.initialize(new Rng(0));
    const ids = [5, 17, 300, 2047, 9, 1000];
    const V = model.vocabSize;
    const ours = noGrad(() => model.forward(Int32Array.from(ids), 1, ids.length).data).slice((ids.length - 1) * V);
    for (const [w, tol] of [
      ['f32', 2e-3],
      ['f16', 5e-3],
    ] as const) {
      const theirs = llamaLogits(files[w], ids);
      assert.equal(theirs.length, V, w);
      let worst = 0;
      for (let i = 0; i < V; i++) worst = Math.max(worst, Math.abs(theirs[i] - ours[i]));
      assert.ok(worst < tol, `${w}: largest logit difference ${worst}`);
    }
  });

  it('scripts/bench_llama.py prints one JSON report with positive timings per batch', { skip }, () => {
    const files = written();
    // The bench's arguments, on 2 and 3 sequences of 4 new tokens.
    const args = llamaArgs(script, files.f16, 1, 2);
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
      reps: 1,
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

    assert.deepEqual(llama.prepare('124m'), []);
    const not = llama.results('124m');
    assert.equal(not.sample_peers, undefined);
    assert.match(not.peers_not_run?.['llama.cpp'] ?? '', /gpt2/);
    assert.match(sampleOnlyRows(not, { sample_tokens_per_s: {} }, String, (c) => c.join('|'))[0], /llama\.cpp {2}could not run this size: .*gpt2/);
  });
});
