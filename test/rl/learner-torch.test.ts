/**
 * The PyTorch learner (learner/) against the embedded engine, on models/micro:
 *  1. one LoRA step (PPO clipping, KL loss term, token_mean, grad clipping, linear schedule) on a
 *     3-sample minibatch, through 2 processes (torchrun, gloo) in float64 and through LocalLearner
 *     on the float64 reference backend: loss, per-token log-probs, KL, clip fraction, gradient norm,
 *     the updated adapters and the next step's log-probs agree within 1e-5 relative; with
 *     parallel ddp and with parallel fsdp (FSDP2, parameters sharded over the 2 processes), and
 *     save_state/load_state returns each to the state after the first step exactly; one full
 *     fine-tuning step (all weights, tied embeddings) the same way; one step on MADPO preference
 *     pairs (DPO's loss) the same way;
 *  2. the example task (configs/custom/config.yaml) trained for 6 items with
 *     trainer.learner.backend=torch logs the same per-agent losses and gradient norms as with
 *     local, drain by drain, within 1e-3 relative (both float32); and with MADPO, step by step;
 *  3. a magrpo checkpoint (LoRA adapter, or full weights) loads in transformers + peft and gives
 *     the logits magrpo's engine gives.
 * Needs Python with torch, transformers and peft (`bash scripts/setup.sh --with-learner`); without
 * them every test is skipped and says why. Run with `nice -n 19`: it starts Python processes.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Rng } from '../../src/engine/rng.js';
import { setBackend, setDType } from '../../src/engine/runtime.js';
import { noGrad } from '../../src/engine/tensor.js';
import { completionLogprobs } from '../../src/model/logprobs.js';
import { applyLora, loadLora } from '../../src/model/lora.js';
import { LanguageModel } from '../../src/model/pretrained.js';
import { readSafetensors } from '../../src/model/safetensors.js';
import { PolicyAgent } from '../../src/rl/agent.js';
import { ConfigError, resolveConfig } from '../../src/rl/config.js';
import { type LearnerSpec, LocalLearner, type LossSample } from '../../src/rl/learner.js';
import { type LearnerConfig, LearnerError, LearnerProcess, specFor, TorchLearner } from '../../src/rl/torch-learner.js';
import { skipTest } from '../helpers/skip.js';
import { float64LearnerConfig, LEARNER_PYTHON, learnerProblem, toyGroups } from '../helpers/torch-learner.js';

const MODEL = join('models', 'micro');
const PY = LEARNER_PYTHON;
const skip = learnerProblem();
if (skip) process.stderr.write(`[learner-torch] ${skip}\n`);

/** |a − b| ≤ tol · max(|b|, scale). */
function close(a: number, b: number, what: string, tol: number, scale = 0): void {
  assert.ok(Number.isFinite(a) && Number.isFinite(b), `${what}: ${a} vs ${b}`);
  assert.ok(Math.abs(a - b) <= tol * Math.max(Math.abs(b), scale, 1e-30), `${what}: embedded ${a}, PyTorch ${b} (relative ${Math.abs(a - b) / Math.abs(b)})`);
}

const LORA = { r: 2, alpha: 4, target_modules: ['q_proj', 'v_proj', 'down_proj'] };
const SPEC: LearnerSpec = {
  index: 0,
  modelDir: MODEL,
  lr: 5e-3,
  weightDecay: 0.01,
  betas: [0.9, 0.999],
  eps: 1e-8,
  maxGradNorm: 0.05,
  lrScheduler: 'linear',
  warmupSteps: 0,
  totalSteps: 4,
  lora: LORA,
  lossAggregation: 'token_mean',
  maxNewTokens: 6,
  ppoClipEps: 0.2,
  referenceKl: { mode: 'loss', coef: 0.3 },
};

/** micro with LoRA adapters whose A and B are random float32-representable values (B ≠ 0, as mid-run). */
function loraModel(): LanguageModel {
  const lm = LanguageModel.load(MODEL);
  applyLora(lm.model, { r: LORA.r, alpha: LORA.alpha, targetModules: LORA.target_modules }, new Rng(1));
  const rng = new Rng(7);
  for (const ad of lm.model.lora.values()) {
    for (const t of [ad.A, ad.B]) for (let i = 0; i < t.size; i++) t.data[i] = Math.fround((rng.next() * 2 - 1) * 0.3);
  }
  return lm;
}

/** Three node samples (one with an empty completion); old and reference log-probs moved off the current ones so PPO clips and the KL has a gradient. */
function minibatch(lm: LanguageModel): LossSample[] {
  return toyGroups().map(({ promptIds, completions }, i) => {
    const scored = completions.filter((c) => c.length > 0);
    const r = noGrad(() =>
      completionLogprobs(
        lm.model,
        scored.map((completion) => ({ prompt: promptIds, completion })),
      ),
    );
    const now: number[][] = scored.map(() => []);
    for (let t = 0; t < r.sequenceOf.length; t++) now[r.sequenceOf[t]].push(r.tokenLogprobs.data[t]);
    let k = 0;
    const cur = completions.map((c) => (c.length > 0 ? now[k++] : []));
    return {
      promptIds,
      completions,
      advantages: [0.9 - i * 0.3, -0.7 + i * 0.1, 0.25],
      oldLogprobs: cur.map((lp, g) => lp.map((x, t) => x + ((g + t) % 3 === 0 ? 0.4 : (g + t) % 3 === 1 ? -0.35 : 0.05))),
      refLogprobs: cur.map((lp) => lp.map((x, t) => x - 0.2 + 0.1 * t)),
    };
  });
}

/** Worst relative difference (scaled by each tensor's RMS) between two safetensors files of `file` (the LoRA adapter by default); asserts it is ≤ tol. */
function compareAdapters(dirA: string, dirB: string, tol: number, file = 'adapter_model.safetensors'): number {
  const a = readSafetensors(join(dirA, file));
  const b = readSafetensors(join(dirB, file));
  assert.deepEqual([...a.keys()].sort(), [...b.keys()].sort(), `${file}: tensor names`);
  let worst = 0;
  for (const [name, ta] of a) {
    const tb = b.get(name) as typeof ta;
    assert.deepEqual(ta.shape, tb.shape, `${name} shape`);
    const rms = Math.sqrt(Array.from(tb.data as Float32Array).reduce((s, x) => s + x * x, 0) / tb.data.length);
    for (let i = 0; i < ta.data.length; i++) {
      const x = Number(ta.data[i]);
      const y = Number(tb.data[i]);
      worst = Math.max(worst, Math.abs(x - y) / Math.max(Math.abs(y), rms));
      close(x, y, `${name}[${i}]`, tol, rms);
    }
  }
  return worst;
}

for (const parallel of ['ddp', 'fsdp'] as const) {
  describe(`PyTorch learner (${parallel}): one step against the embedded engine (2 processes, gloo, float64)`, () => {
    let proc: LearnerProcess | null = null;
    const cfg = float64LearnerConfig(parallel, PY);
    before(() => {
      setBackend('reference');
      setDType('float64');
      if (!skip) proc = new LearnerProcess(cfg);
    });
    after(async () => {
      setDType('float32');
      await proc?.close();
    });

    it('same loss, log-probs, KL, clip fraction, grad norm and updated LoRA weights within 1e-5; save_state/load_state round trip', async (t) => {
      if (skip || !proc) return skipTest(t, 'learner', skip ?? 'no learner');
      /** Worst relative difference seen, by quantity (printed: the measured tolerances). */
      const worst: Record<string, number> = {};
      const check = (a: number, b: number, what: string, kind: string) => {
        close(a, b, what, 1e-5);
        worst[kind] = Math.max(worst[kind] ?? 0, Math.abs(a - b) / Math.max(Math.abs(b), 1e-30));
      };
      const lmA = loraModel();
      const lmB = loraModel();
      const batch = minibatch(lmA);
      const local = new LocalLearner(SPEC, lmA);
      const torch = new TorchLearner(SPEC, lmB, proc.spec(cfg));
      const a = await local.forwardBackward(batch);
      const b = await torch.forwardBackward(batch);
      const how = parallel === 'fsdp' ? 'FSDP2 \\(2 decoder layers, then the root, sharded\\)' : 'DDP';
      assert.match(proc.tail(40), new RegExp(`agent 0: \\d+ trainable parameters, ${how} over 2 process`), 'the learner says how it runs');
      check(a.loss, b.loss, 'loss', 'loss');
      check(a.entropySum, b.entropySum, 'entropy', 'entropy');
      check(a.kl as number, b.kl as number, 'KL', 'KL');
      assert.equal(a.tokens, b.tokens, 'scored tokens');
      assert.equal(a.sequences, b.sequences, 'sequences');
      assert.equal(a.clipFraction, b.clipFraction, 'clip fraction');
      assert.ok(a.clipFraction > 0, 'the case clips some tokens');
      for (const [i, s] of a.logprobs.entries())
        for (const [g, lp] of s.entries()) for (const [k, x] of lp.entries()) check(x, b.logprobs[i][g][k], `logprob[${i}][${g}][${k}]`, 'log-probs');
      const sa = await local.optimStep();
      const sb = await torch.optimStep();
      check(sa.gradNorm, sb.gradNorm, 'gradient norm', 'grad norm');
      assert.ok(sa.gradNorm > SPEC.maxGradNorm!, 'the case clips the gradient');
      close(sa.lr, sb.lr, 'lr', 1e-12);
      const dir = mkdtempSync(join(tmpdir(), 'learner-parity-'));
      try {
        await local.saveAdapter(join(dir, 'local'));
        await torch.saveAdapter(join(dir, 'torch'));
        worst.adapters = compareAdapters(join(dir, 'local'), join(dir, 'torch'), 1e-5);
        await torch.saveState(join(dir, 'state'));
        // The next minibatch has one sample: the second process scores nothing and joins with weight 0.
        const a2 = await local.forwardBackward(batch.slice(0, 1));
        const b2 = await torch.forwardBackward(batch.slice(0, 1));
        check(a2.loss, b2.loss, 'loss after the step', 'loss');
        for (const [g, lp] of a2.logprobs[0].entries())
          for (const [k, x] of lp.entries()) check(x, b2.logprobs[0][g][k], `logprob after the step [${g}][${k}]`, 'log-probs');
        const sa2 = await local.optimStep();
        const sb2 = await torch.optimStep();
        check(sa2.gradNorm, sb2.gradNorm, 'second gradient norm', 'grad norm');
        await local.saveAdapter(join(dir, 'local2'));
        await torch.saveAdapter(join(dir, 'torch2'));
        worst.adapters = Math.max(worst.adapters, compareAdapters(join(dir, 'local2'), join(dir, 'torch2'), 1e-5));
        // Back to the state after the first step (weights, AdamW moments, step counter): the
        // second step again gives the same numbers and the same adapters.
        await torch.loadState(join(dir, 'state'));
        const b3 = await torch.forwardBackward(batch.slice(0, 1));
        const sb3 = await torch.optimStep();
        assert.equal(b3.loss, b2.loss, 'loss of the second step after load_state');
        assert.deepEqual(b3.logprobs, b2.logprobs, 'log-probs of the second step after load_state');
        assert.equal(sb3.gradNorm, sb2.gradNorm, 'gradient norm of the second step after load_state');
        assert.equal(sb3.step, sb2.step, 'step counter after load_state');
        assert.equal(sb3.lr, sb2.lr, 'scheduled lr after load_state');
        await torch.saveAdapter(join(dir, 'torch3'));
        assert.equal(compareAdapters(join(dir, 'torch2'), join(dir, 'torch3'), 0), 0, 'adapters of the second step after load_state');
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
      const measured = Object.entries(worst)
        .map(([k, v]) => `${k} ${v.toExponential(2)}`)
        .join(', ');
      process.stderr.write(`[learner-torch] ${parallel}, two steps: worst relative difference from the embedded engine: ${measured}\n`);
    });

    it('MADPO preference pairs: same DPO loss, log-probs, grad norm and updated LoRA weights within 1e-5', async (t) => {
      if (skip || !proc) return skipTest(t, 'learner', skip ?? 'no learner');
      const spec: LearnerSpec = { ...SPEC, index: 1, algorithm: 'madpo' };
      const lmA = loraModel();
      const lmB = loraModel();
      const rng = new Rng(5);
      const tok = () => 3 + Math.floor(rng.next() * 4000);
      // three pairs over three processes' worth of samples; the last loser is empty (log-prob sum 0)
      const pairs: LossSample[] = [
        [4, 3, 5],
        [6, 2, 4],
        [3, 6, 0],
      ].map(([prompt, w, l], i) => ({
        promptIds: [0, ...Array.from({ length: prompt - 1 }, tok)],
        completions: [Array.from({ length: w }, tok), Array.from({ length: l }, tok)],
        advantages: [],
        oldLogprobs: [[], []],
        preference: { beta: 0.5, otherDelta: 0.8 - 0.6 * i, refDelta: -0.3 + 0.4 * i },
      }));
      const local = new LocalLearner(spec, lmA);
      const torch = new TorchLearner(spec, lmB, proc.spec(cfg));
      const a = await local.forwardBackward(pairs);
      const b = await torch.forwardBackward(pairs);
      close(a.loss, b.loss, 'loss', 1e-5);
      assert.equal(a.tokens, b.tokens, 'scored tokens');
      for (const [i, s] of a.logprobs.entries())
        for (const [g, lp] of s.entries()) for (const [k, x] of lp.entries()) close(x, b.logprobs[i][g][k], `logprob[${i}][${g}][${k}]`, 1e-5);
      const sa = await local.optimStep();
      const sb = await torch.optimStep();
      close(sa.gradNorm, sb.gradNorm, 'gradient norm', 1e-5);
      const dir = mkdtempSync(join(tmpdir(), 'learner-dpo-'));
      try {
        await local.saveAdapter(join(dir, 'local'));
        await torch.saveAdapter(join(dir, 'torch'));
        compareAdapters(join(dir, 'local'), join(dir, 'torch'), 1e-5);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('full fine-tuning (every weight trainable, tied embeddings): same loss, log-probs, grad norm and updated weights within 1e-5', async (t) => {
      if (skip || !proc) return skipTest(t, 'learner', skip ?? 'no learner');
      const spec: LearnerSpec = { ...SPEC, index: 1, lora: null };
      const batch = minibatch(loraModel());
      const local = new LocalLearner(spec, LanguageModel.load(MODEL));
      const torch = new TorchLearner(spec, LanguageModel.load(MODEL), proc.spec(cfg));
      const worst: Record<string, number> = {};
      const check = (a: number, b: number, what: string, kind: string) => {
        close(a, b, what, 1e-5);
        worst[kind] = Math.max(worst[kind] ?? 0, Math.abs(a - b) / Math.max(Math.abs(b), 1e-30));
      };
      const a = await local.forwardBackward(batch);
      const b = await torch.forwardBackward(batch);
      assert.match(proc.tail(40), new RegExp(`agent 1: \\d+ trainable parameters, ${parallel === 'fsdp' ? 'FSDP2' : 'DDP'}`), 'the learner says how it runs');
      check(a.loss, b.loss, 'loss', 'loss');
      for (const [i, s] of a.logprobs.entries())
        for (const [g, lp] of s.entries()) for (const [k, x] of lp.entries()) check(x, b.logprobs[i][g][k], `logprob[${i}][${g}][${k}]`, 'log-probs');
      const sa = await local.optimStep();
      const sb = await torch.optimStep();
      check(sa.gradNorm, sb.gradNorm, 'gradient norm', 'grad norm');
      assert.ok(sa.gradNorm > spec.maxGradNorm!, 'the case clips the gradient');
      const dir = mkdtempSync(join(tmpdir(), 'learner-full-'));
      try {
        await local.saveAdapter(join(dir, 'local'));
        await torch.saveAdapter(join(dir, 'torch'));
        worst.weights = compareAdapters(join(dir, 'local'), join(dir, 'torch'), 1e-5, 'model.safetensors');
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
      const measured = Object.entries(worst)
        .map(([k, v]) => `${k} ${v.toExponential(2)}`)
        .join(', ');
      process.stderr.write(`[learner-torch] ${parallel}, full fine-tuning, one step: worst relative difference from the embedded engine: ${measured}\n`);
    });
  });
}

describe('PyTorch learner: the example task, local vs torch', () => {
  /** Trains configs/custom/config.yaml into out/name (no evaluation; `extra` flags); its entries that logged an update. */
  const trainCustom = (out: string, name: string, extra: string[]) => {
    const r = spawnSync(
      process.execPath,
      [
        '--import',
        'tsx',
        'src/cli/main.ts',
        'train',
        'configs/custom/config.yaml',
        '-q',
        '--set',
        `output_dir=${out}`,
        '--set',
        `run_name=${name}`,
        '--set',
        'trainer.eval_interval=0',
        ...extra,
      ],
      { encoding: 'utf8', timeout: 1_500_000, env: { ...process.env, MAGRPO_LEARNER_PYTHON: PY } },
    );
    assert.equal(r.status, 0, `${name} run failed:\n${r.stdout}\n${r.stderr}`);
    return readFileSync(join(out, name, 'metrics.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, number>)
      .filter((m) => 'agent_0/loss' in m || 'agent_1/loss' in m);
  };

  it('6 items of configs/custom/config.yaml log the same per-agent losses and grad norms within 1e-3', async (t) => {
    if (skip) return skipTest(t, 'learner', skip);
    const out = mkdtempSync(join(tmpdir(), 'learner-trainer-'));
    try {
      const run = (name: string, extra: string[]) => trainCustom(out, name, ['--max-items', '6', ...extra]);
      const local = run('local', []);
      const torch = run('torch', ['--set', 'trainer.learner.backend=torch', '--set', `trainer.learner.python=${PY}`]);
      assert.ok(local.length >= 2, `${local.length} logged updates`);
      assert.equal(torch.length, local.length, 'logged updates');
      let worst = 0;
      for (const [k, m] of local.entries()) {
        for (const key of Object.keys(m).filter((x) => /^agent_\d+\/(loss|grad_norm)$/.test(x))) {
          const x = m[key];
          const y = torch[k][key];
          worst = Math.max(worst, Math.abs(x - y) / Math.max(Math.abs(y), 1e-6));
          close(x, y, `update ${k} ${key}`, 1e-3, 1e-6);
        }
      }
      process.stderr.write(`[learner-torch] example task: worst relative difference of logged loss/grad_norm ${worst.toExponential(2)}\n`);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  it('MADPO on the example task (pairs of its 8 items, 2 epochs) logs the same losses, grad norms and margins within 1e-3', async (t) => {
    if (skip) return skipTest(t, 'learner', skip);
    const out = mkdtempSync(join(tmpdir(), 'learner-madpo-'));
    try {
      const madpo = [
        'trainer.algorithm=madpo',
        'trainer.preference_num_candidates=4',
        'trainer.preference_pairs_per_sample=2',
        'trainer.train_batch_size=4',
        'trainer.num_train_epochs=2',
      ].flatMap((x) => ['--set', x]);
      const local = trainCustom(out, 'local', madpo);
      const torch = trainCustom(out, 'torch', [...madpo, '--set', 'trainer.learner.backend=torch', '--set', `trainer.learner.python=${PY}`]);
      assert.ok(local.length >= 4, `${local.length} logged steps`);
      assert.equal(torch.length, local.length, 'logged steps');
      for (const [k, m] of local.entries())
        for (const key of Object.keys(m).filter((x) => /^(agent_\d+\/(loss|grad_norm)|preference\/margin)$/.test(x)))
          close(m[key], torch[k][key], `step ${k} ${key}`, 1e-3, 1e-6);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});

describe('magrpo checkpoints in transformers + peft', () => {
  before(() => {
    setBackend('reference');
    setDType('float64');
  });
  after(() => setDType('float32'));

  const logitsOf = (model: string, adapter: string | null, ids: number[]): Float64Array => {
    const args = ['-m', 'magrpo_learner.logits', '--model', model, '--ids', ids.join(','), '--dtype', 'float64', ...(adapter ? ['--adapter', adapter] : [])];
    const r = spawnSync(PY, args, { encoding: 'utf8', timeout: 600_000, env: { ...process.env, PYTHONPATH: 'learner' }, maxBuffer: 1 << 28 });
    assert.equal(r.status, 0, r.stderr);
    return Float64Array.from((JSON.parse(r.stdout) as { logits: number[] }).logits);
  };

  for (const lora of [true, false]) {
    it(`a checkpoint's ${lora ? 'LoRA adapter' : 'full weights'} give magrpo's logits in transformers${lora ? ' + peft' : ''}`, async (t) => {
      if (skip) return skipTest(t, 'learner', skip);
      const dir = mkdtempSync(join(tmpdir(), 'learner-interop-'));
      try {
        const agent = new PolicyAgent({ ...SPEC, lora: lora ? LORA : null, ppoClipEps: null, referenceKl: null, seed: 5, lr: 0.02, maxGradNorm: null });
        const sample: LossSample = { promptIds: [0, 11, 12], completions: [[40, 41, 1], [50]], advantages: [1, -1], oldLogprobs: [[], []] };
        for (let i = 0; i < 3; i++) await agent.update([[sample]]); // moved away from the base (B ≠ 0)
        await agent.save(dir);
        const lm = LanguageModel.load(lora ? MODEL : join(dir, 'model'));
        if (lora) loadLora(lm.model, join(dir, 'adapter'));
        const ids = [0, 11, 12, 40, 41, 1, 50, 7];
        const ours = lm.model.forward(Int32Array.from(ids), 1, ids.length).data;
        const theirs = logitsOf(lora ? MODEL : join(dir, 'model'), lora ? join(dir, 'adapter') : null, ids);
        assert.equal(theirs.length, ours.length, 'logits size');
        const rms = Math.sqrt(Array.from(theirs).reduce((s, x) => s + x * x, 0) / theirs.length);
        for (let i = 0; i < ours.length; i++) close(ours[i], theirs[i], `logit ${i}`, 1e-5, rms);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});

describe('learner config and client errors (no Python needed)', () => {
  it('learner defaults to the embedded engine; bad keys are named', () => {
    assert.equal(resolveConfig({}).learner.backend, 'local');
    const bad = (learner: unknown, path: string) =>
      assert.throws(
        () => resolveConfig({ learner }),
        (e: unknown) => e instanceof ConfigError && e.issues.some((i) => i.path === path),
        path,
      );
    assert.equal(resolveConfig({ learner: { backend: 'torch', parallel: 'fsdp' } }).learner.parallel, 'fsdp');
    bad({ backend: 'torch', parallel: 'zero3' }, 'learner.parallel');
    bad({ url: 'ftp://host:1' }, 'learner.url');
    bad({ nproc: 0 }, 'learner.nproc');
    bad({ backend: 'jax' }, 'learner.backend');
  });

  const spec: LearnerSpec = { ...SPEC, lora: null };
  const base: LearnerConfig = {
    backend: 'torch',
    url: null,
    python: null,
    command: null,
    nproc: 1,
    device: 'cpu',
    parallel: 'ddp',
    dtype: 'float32',
    exchange_dir: null,
    timeout_s: 2,
    startup_timeout_s: 2,
    max_message_mb: 0.01,
  };
  /** A fake learner (test double) answering forward_backward with `reply`. */
  async function fake(reply: (res: import('node:http').ServerResponse) => void): Promise<{ server: Server; url: string }> {
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        if (req.url === '/v1/create_agent') res.end(JSON.stringify({ ok: true }));
        else reply(res);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
  }
  const sample: LossSample = { promptIds: [0, 5], completions: [[7, 8]], advantages: [1], oldLogprobs: [[-1, -2]] };
  const cases: [string, (res: import('node:http').ServerResponse) => void, RegExp][] = [
    ['a missing field is named', (res) => res.end(JSON.stringify({ ok: true, logprobs: [[[-1, -2]]] })), /field "loss" is missing/],
    [
      'a mistyped field is named',
      (res) => res.end(JSON.stringify({ ok: true, loss: 'x', logprobs: [[[-1, -2]]] })),
      /field "loss" is "x", expected a finite number/,
    ],
    [
      'log-probs of the wrong shape are named',
      (res) => res.end(JSON.stringify({ ok: true, loss: 1, logprobs: [[[-1]]] })),
      /logprobs\[0\]\[0\]" should hold 2 numbers/,
    ],
    ['a reply that is not JSON', (res) => res.end('<html>'), /not JSON/],
    [
      'an error reply is passed on',
      (res) => res.writeHead(500).end(JSON.stringify({ ok: false, error: 'CUDA out of memory' })),
      /HTTP 500: CUDA out of memory/,
    ],
    ['a reply over max_message_mb', (res) => res.end(JSON.stringify({ ok: true, pad: 'x'.repeat(50_000) })), /exceeds learner.max_message_mb/],
    ['a learner that does not answer in timeout_s', () => undefined, /no answer from the learner within learner.timeout_s/],
  ];
  for (const [name, reply, expected] of cases) {
    it(name, async () => {
      const { server, url } = await fake(reply);
      try {
        const lm = LanguageModel.load(MODEL);
        const learner = new TorchLearner(spec, lm, specFor({ ...base, url }, url, tmpdir()));
        await assert.rejects(learner.forwardBackward([sample]), (e: unknown) => e instanceof LearnerError && expected.test(e.message));
      } finally {
        server.closeAllConnections();
        server.close();
      }
    });
  }

  it('a learner process that exits is reported with its exit code and last output', async () => {
    const proc = new LearnerProcess({
      ...base,
      startup_timeout_s: 60,
      command: [process.execPath, '-e', 'console.error("no GPU here"); process.exit(3)', '--'],
    });
    try {
      const learner = new TorchLearner(spec, LanguageModel.load(MODEL), proc.spec(base));
      await assert.rejects(
        learner.optimStep(),
        (e: unknown) => e instanceof LearnerError && /exited with code 3/.test(e.message) && /no GPU here/.test(e.message),
      );
    } finally {
      await proc.close();
    }
  });

  it('an unreachable learner is named', async () => {
    const learner = new TorchLearner(spec, LanguageModel.load(MODEL), specFor({ ...base, startup_timeout_s: 0.5 }, 'http://127.0.0.1:9', tmpdir()));
    await assert.rejects(learner.optimStep(), (e: unknown) => e instanceof LearnerError && /cannot reach the learner at http:\/\/127.0.0.1:9/.test(e.message));
  });
});
