/**
 * `magrpo bench`: the JSON report of one small size (no timing assertions: only that every figure
 * is there), the peers it looks for, the FLOPs per token the physical limits use, the opt-in 500m
 * size (checked from its config, never run here: minutes and ~10 GB) and the LoRA training path.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { bestOf, bestTraining, type Throughput } from '../../src/bench/engine.js';
import {
  type ChildReport,
  DEFAULT_SIZES,
  flopsPerToken,
  forwardFlops,
  LORA_RANK,
  loraParams,
  repeatsArg,
  SIZES,
  TIMED_REPEATS,
  TRAIN_SEQ,
  timed,
  trainStep,
} from '../../src/bench/models.js';
import { findPeers, pypiCandidates } from '../../src/bench/peers.js';
import { Rng } from '../../src/engine/rng.js';
import { parseModelConfig } from '../../src/model/hf-config.js';
import { createModel, paramSpecsOf } from '../../src/model/load.js';

const main = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));
const root = fileURLToPath(new URL('../..', import.meta.url));
const bench = (...args: string[]) => spawnSync(process.execPath, [...process.execArgv, main, 'bench', ...args], { encoding: 'utf8' });
const tmp = mkdtempSync(join(tmpdir(), 'magrpo-bench-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

describe('magrpo bench', () => {
  it('--json prints one object: machine, doctor report, matmul, engines and per-size throughput; --out writes the same', () => {
    const file = join(tmp, 'r.json');
    const r = bench('--sizes', '1m', '--quick', '--no-torch', '--json', '--threads', '1', '--out', file);
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.deepEqual(JSON.parse(readFileSync(file, 'utf8')), out);
    assert.equal(out.schema, 2);
    assert.equal(out.threads, 1);
    assert.match(out.machine.class, /^[a-z0-9-]+-\d+cpu$/);
    assert.ok(out.machine.blas_core.length > 0);
    assert.ok(out.doctor.peakPerCore.gflops > 0, 'the measured per-core ceiling');
    assert.deepEqual(Object.keys(out.matmul_gflops), ['1024x1024x1024', '512x768x3072']);
    for (const g of Object.values(out.matmul_gflops) as Record<string, number>[]) assert.ok(g[1] > 0);
    assert.equal(out.sgemm_limit_gflops, out.doctor.peakPerCore.gflops, '1 thread × the per-core ceiling');
    assert.deepEqual(
      out.engines.map((e: { id: string }) => e.id),
      ['magrpo'],
      '--no-torch looks for no peers',
    );
    assert.equal(out.engines[0].settings.MAGRPO_NUM_THREADS, '1');
    assert.deepEqual(Object.keys(out.sizes), ['1m']);
    const s = out.sizes['1m'];
    assert.equal(s.params, 1000576);
    assert.deepEqual(s.flops_per_token, flopsPerToken(SIZES['1m'].hf));
    assert.ok(s.magrpo.train_tokens_per_s > 0 && s.magrpo.peak_rss_mb > 0);
    assert.deepEqual(Object.keys(s.magrpo.sample_tokens_per_s), ['8', '32']);
    assert.deepEqual(s.peers, {});
  });

  it('rejects an unknown size, naming the known ones', () => {
    const r = bench('--sizes', '3m', '--no-torch');
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /unknown size "3m".*1m, 10m, 124m, 500m/);
  });

  it('--lora: the worker also times LoRA training, adapters only, after sampling and before full fine-tuning', () => {
    const r = bench('--worker', '1m', '--quick', '--lora');
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '') as ChildReport;
    assert.equal(out.train_batch, 8);
    assert.equal(out.train.wall.length, 1);
    assert.equal(out.train_lora?.wall.length, 1);
    // 4 layers × 7 projections, rank 16 × (in + out) each.
    assert.deepEqual(out.lora, { r: 16, alpha: 32, modules: 28, trainable_params: loraParams(SIZES['1m'].hf) });
    assert.equal(loraParams(SIZES['1m'].hf), 4 * 16 * (2 * (128 + 128) + 2 * (128 + 64) + 3 * (128 + 352)));
    assert.deepEqual(Object.keys(out.rss_mb ?? {}), ['sample', 'lora', 'full']);
    // Without --lora, a size that does not ask for it trains fully only.
    const plain = JSON.parse(bench('--worker', '1m', '--quick').stdout.trim().split('\n').at(-1) ?? '') as ChildReport;
    assert.equal(plain.train_lora, undefined);
  });
});

describe('bench LoRA training step', () => {
  it('trains only the adapters (base weights bit-identical), then full fine-tuning trains every parameter', () => {
    const model = createModel(parseModelConfig(SIZES['1m'].hf));
    const rng = new Rng(0);
    model.initialize(rng);
    const before = new Map([...model.params].map(([k, p]) => [k, Float32Array.from(p.data)]));

    const lora = trainStep(model, 'lora', 2, rng);
    assert.equal(model.lora.size, 28, 'every linear layer of the 4 blocks');
    const adapters = [...model.lora.values()].flatMap((a) => [a.A, a.B]);
    assert.deepEqual(new Set(lora.params), new Set(adapters), 'AdamW gets the adapters and nothing else');
    assert.equal(
      lora.params.reduce((n, p) => n + p.size, 0),
      loraParams(SIZES['1m'].hf),
    );
    const a0 = adapters.map((p) => Float32Array.from(p.data));
    lora.step();
    lora.step(); // B starts at 0, so A first moves in the second step
    for (const [k, p] of model.params) assert.deepEqual(p.data, before.get(k), `${k} is frozen`);
    for (const [i, p] of adapters.entries()) assert.notDeepEqual(p.data, a0[i], `${p.name} is trained`);

    const full = trainStep(model, 'full', 2, rng);
    assert.equal(model.lora.size, 0, 'adapters removed');
    assert.equal(full.params.length, model.params.size);
    full.step();
    for (const [k, p] of model.params) assert.notDeepEqual(p.data, before.get(k), `${k} is trained`);
  });
});

describe('500m size', () => {
  const hf = SIZES['500m'].hf;
  it('is Qwen2.5-0.5B-shaped: 494,032,768 parameters counted from the config (nothing allocated), opt-in', () => {
    const cfg = parseModelConfig(hf);
    assert.equal(cfg.modelType, 'qwen2');
    assert.ok(cfg.arch === 'llama' && cfg.attentionBias && !cfg.oProjBias && cfg.tieWordEmbeddings && cfg.ropeTheta === 1e6);
    const params = paramSpecsOf(cfg).reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0);
    // Qwen/Qwen2.5-0.5B: embeddings 151936 × 896 (tied) + 24 layers × 14,912,384 + final norm 896.
    assert.equal(params, 151936 * 896 + 24 * 14_912_384 + 896);
    assert.equal(params, 494_032_768);
    // PEFT's count for r = 16 on all linear layers of Qwen2.5-0.5B.
    assert.equal(loraParams(hf, LORA_RANK), 8_798_208);
    assert.ok(SIZES['500m'].lora && (SIZES['500m'].trainBatch ?? 0) * TRAIN_SEQ === 512);
    assert.deepEqual(DEFAULT_SIZES, ['1m', '10m', '124m']);
  });

  it('LoRA training FLOPs: 2 forwards + the attention again + 6 per adapter parameter, about 2/3 of full', () => {
    const f = flopsPerToken(hf);
    const ctx = (TRAIN_SEQ + 1) / 2;
    const attn = forwardFlops(hf, ctx) - forwardFlops(hf, 0);
    assert.equal(f.train_lora, 2 * forwardFlops(hf, ctx) + attn + 6 * 8_798_208);
    assert.ok(f.train_lora / f.train > 0.66 && f.train_lora / f.train < 0.7, String(f.train_lora / f.train));
  });
});

describe('docs/benchmarks.md', () => {
  it('is what scripts/bench-report.mjs makes of bench/results', () => {
    const r = spawnSync(process.execPath, [join(root, 'scripts', 'bench-report.mjs'), '--check'], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
  });
});

describe('bench peers', () => {
  it("reports each peer as found or not, with the reason, and each PyTorch's BLAS-thread variants", () => {
    const peers = findPeers('/usr/bin/python3', root, 2, { PATH: process.env.PATH });
    assert.deepEqual(
      peers.map((p) => p.id),
      ['torch-debian', 'torch-pypi', 'llama.cpp'],
    );
    for (const p of peers) {
      if (p.runnable) assert.ok(p.python && p.variants.length > 0, p.id);
      else assert.match(p.why ?? '', /not found|not supported|not Debian/, p.id);
    }
    const deb = peers[0];
    if (deb.runnable) {
      assert.deepEqual(
        deb.variants.map((v) => v.env),
        [{ OPENBLAS_NUM_THREADS: '1' }, { OPENBLAS_NUM_THREADS: '2' }, { OPENBLAS_NUM_THREADS: '2', OMP_WAIT_POLICY: 'passive' }],
      );
      // A user's own wait policy is kept: no passive variant then.
      const mine = findPeers('/usr/bin/python3', root, 2, { PATH: process.env.PATH, OMP_WAIT_POLICY: 'active' })[0];
      assert.equal(mine.variants.length, 2);
    }
    // PyPI's torch: its defaults and MKL on one thread, unless the user set MKL's thread count.
    const pypi = peers[1];
    if (pypi.runnable) {
      assert.deepEqual(
        pypi.variants.map((v) => v.env),
        [{}, { MKL_NUM_THREADS: '1' }],
      );
      const set = findPeers('/usr/bin/python3', root, 2, { PATH: process.env.PATH, MKL_NUM_THREADS: '2' })[1];
      assert.equal(set.variants.length, 1);
    }
    // A missing interpreter is "not found", not an error.
    assert.equal(findPeers('/nonexistent/python', root, 2, { PATH: '' })[0].found, false);
  });

  it('looks for a PyPI torch in MAGRPO_TORCH_PYTHON first, then python3', () => {
    const list = pypiCandidates(root, { MAGRPO_TORCH_PYTHON: process.execPath });
    assert.equal(list[0], process.execPath);
    assert.equal(list.at(-1), 'python3');
    assert.ok(!pypiCandidates(root, { MAGRPO_TORCH_PYTHON: '/nonexistent/python' }).includes('/nonexistent/python'));
  });
});

describe('timed calls', () => {
  it('runs the warm-up rule untimed, then at least min timed calls, more up to max while under the seconds', () => {
    let calls = 0;
    const fn = () => {
      calls++;
    };
    const t = timed(fn, { min: 3, max: 30, seconds: 0 }, { min: 2, max: 2, seconds: 0 });
    assert.equal(calls, 5);
    assert.equal(t.wall.length, 3);
    assert.equal(t.cpu.length, 3);
    calls = 0;
    // A generous time budget: max bounds both.
    const long = timed(fn, { min: 3, max: 7, seconds: 3600 }, { min: 1, max: 4, seconds: 3600 });
    assert.equal(calls, 11);
    assert.equal(long.wall.length, 7);
    assert.equal(repeatsArg(TIMED_REPEATS), `${TIMED_REPEATS.min},${TIMED_REPEATS.max},${TIMED_REPEATS.seconds}`);
  });
});

describe("training at each side's best", () => {
  const tp = (train: number, bf16?: number): Throughput => ({
    params: 1,
    train_tokens_per_s: train,
    train_tokens_per_cpu_s: train / 2,
    sample_tokens_per_s: { 8: 1, 32: 1 },
    sample_tokens_per_cpu_s: { 8: 1, 32: 1 },
    peak_rss_mb: 1,
    ...(bf16 === undefined ? {} : { train_bf16_tokens_per_s: bf16 }),
  });

  it('a peer keeps its fastest bf16 training over its settings, apart from its fastest fp32', () => {
    const best = bestOf({ defaults: tp(100, 90), 'MKL threads 1': tp(120, 80) });
    assert.equal(best.train_tokens_per_s, 120);
    assert.equal(best.best_variant.train, 'MKL threads 1');
    assert.equal(best.train_bf16_tokens_per_s, 90);
    assert.equal(best.best_variant.train_bf16, 'defaults');
    assert.equal(bestOf({ defaults: tp(100) }).train_bf16_tokens_per_s, undefined);
  });

  it('compares the faster precision of each side against the strongest peer', () => {
    // Ours is faster in bf16; one peer is faster in its fp32, the other in bf16 autocast.
    const r = bestTraining(tp(100, 180), { a: tp(120, 90), b: tp(80, 150) });
    assert.deepEqual(r?.magrpo, { engine: 'magrpo', tokens_per_s: 180, precision: 'bf16' });
    assert.deepEqual(r?.peer, { engine: 'b', tokens_per_s: 150, precision: 'bf16' });
    assert.equal(r?.ratio, 180 / 150);
    // Without bf16 figures it is fp32 against fp32; without peers there is no figure.
    assert.equal(bestTraining(tp(100), { a: tp(50) })?.ratio, 2);
    assert.equal(bestTraining(tp(100), {}), undefined);
  });
});

describe('FLOPs per token', () => {
  it('GPT-2 small: 2 per weight of the 12 blocks and the LM head, plus attention', () => {
    const hf = SIZES['124m'].hf;
    const C = 768;
    const weights = 12 * 12 * C * C + 50257 * C;
    assert.equal(forwardFlops(hf, 0), 2 * weights);
    assert.equal(forwardFlops(hf, 10) - forwardFlops(hf, 0), 4 * 12 * C * 10);
    const f = flopsPerToken(hf);
    assert.ok(f.train > 3 * 2 * weights && f.sample > 2 * weights);
  });

  it('Llama with grouped-query attention counts the smaller key/value projections', () => {
    const hf = SIZES['1m'].hf; // C128 H4 KV2 D32 F352 L4 V2048
    const perLayer = 2 * 128 * 128 + 2 * 128 * 64 + 3 * 128 * 352;
    assert.equal(forwardFlops(hf, 0), 2 * (4 * perLayer + 2048 * 128));
  });
});
