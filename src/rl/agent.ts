/**
 * One agent of the team: its own model, tokenizer, optimizer, sampling RNG and, optionally, LoRA
 * adapters and a frozen reference copy. It does all model-side work of the trainer (sampling and
 * the policy-gradient update) and is driven through plain data, so the same class runs in-process
 * or inside a worker thread (rl/agent-pool.ts).
 */
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { add, clamp, exp, minimum, mul, scale, sub, weightedSum } from '../engine/ops.js';
import { AdamW, clipGradNorm, gradNorm, lrMultiplier, type ScheduleKind } from '../engine/optim.js';
import { Rng, type RngState } from '../engine/rng.js';
import { type BackendName, setBackend } from '../engine/runtime.js';
import { backward, noGrad, type Tensor, tensor } from '../engine/tensor.js';
import { writeFileAtomic } from '../model/atomic-write.js';
import { completionLogprobs } from '../model/logprobs.js';
import { applyLora, loadLora, saveLora } from '../model/lora.js';
import { LanguageModel } from '../model/pretrained.js';
import { readSafetensors, writeSafetensors } from '../model/safetensors.js';

/** Everything needed to build an agent; plain data so it can cross a worker boundary. */
export interface AgentSpec {
  index: number;
  modelDir: string;
  seed: number;
  lr: number;
  weightDecay: number;
  betas: [number, number];
  eps: number;
  maxGradNorm: number | null;
  lrScheduler: ScheduleKind;
  warmupSteps: number;
  /** Estimated optimizer steps of the run (for linear/cosine schedules). */
  totalSteps: number;
  lora: { r: number; alpha: number; target_modules: string[] } | null;
  lossAggregation: 'sequence_sum' | 'token_mean' | 'constant_norm';
  maxNewTokens: number;
  ppoClipEps: number | null;
  referenceKl: { mode: 'reward_shaping' | 'loss'; coef: number } | null;
  /** Keep a frozen copy of the starting model to score each completion's NLL (fluency tracking). */
  trackReference?: boolean;
  /** Kernel backend and thread count inside a worker (in-process agents share the main one). */
  backend?: BackendName;
  threads?: number;
}

export interface SamplingParams {
  maxNewTokens: number;
  stopStrings: readonly string[];
  temperature: number;
  topK: number | null;
  topP: number;
}

export interface SampledGroup {
  prompt: string;
  promptIds: number[];
  completions: { ids: number[]; text: string; logprobs: number[] }[];
  /** Per completion: Σ_t log π_ref(token), present when a reference model exists. */
  refLogprobs?: number[][];
  /** Per completion: k3 KL estimate vs the reference, summed over tokens. */
  refKl?: number[];
  /** Per completion: mean per-token NLL under the reference (the frozen starting model). */
  refNll?: number[];
}

/** One node sample ready for the loss: its G completions with their advantages. */
export interface LossSample {
  promptIds: number[];
  completions: number[][];
  advantages: number[];
  /** Sampling-time log-probs per token (π_old), for PPO ratios. */
  oldLogprobs: number[][];
  refLogprobs?: number[][];
}

export interface UpdateStats {
  loss: number;
  gradNorm: number;
  entropy: number;
  completionLength: number;
  steps: number;
  lr: number;
}

export class PolicyAgent {
  readonly lm: LanguageModel;
  private readonly ref: LanguageModel | null;
  readonly rng: Rng;
  private opt: AdamW;
  private steps = 0;

  constructor(readonly spec: AgentSpec) {
    if (spec.backend) setBackend(spec.backend);
    this.lm = LanguageModel.load(spec.modelDir);
    this.rng = new Rng(spec.seed);
    if (spec.lora) applyLora(this.lm.model, { r: spec.lora.r, alpha: spec.lora.alpha, targetModules: spec.lora.target_modules }, this.rng);
    this.ref = spec.referenceKl || spec.trackReference ? LanguageModel.load(spec.modelDir) : null;
    if (this.ref) for (const p of this.ref.model.params.values()) p.requiresGrad = false;
    this.opt = new AdamW(this.lm.model.trainableParams(), { lr: spec.lr, betas: spec.betas, eps: spec.eps, weightDecay: spec.weightDecay });
  }

  /** Samples `n` completions for each prompt, all in one batch. */
  sample(requests: { prompt: string; n: number }[], params: SamplingParams): SampledGroup[] {
    const flat = requests.flatMap((r) => new Array<string>(r.n).fill(r.prompt));
    const out = this.lm.sample(flat, { ...params, rng: this.rng });
    const groups: SampledGroup[] = [];
    let i = 0;
    for (const r of requests) {
      const mine = out.slice(i, i + r.n);
      i += r.n;
      const g: SampledGroup = {
        prompt: r.prompt,
        promptIds: mine[0]?.promptIds ?? this.lm.encode(r.prompt),
        completions: mine.map((s) => ({ ids: s.completionIds, text: s.text, logprobs: s.logprobs })),
      };
      if (this.ref) this.attachReference(g);
      groups.push(g);
    }
    return groups;
  }

  /** Reference log-probs, KL (k3, spec §1.7) and mean NLL of each completion, no gradient. */
  private attachReference(g: SampledGroup): void {
    const ref = this.ref as LanguageModel;
    const batch = g.completions.map((c) => ({ prompt: g.promptIds, completion: c.ids }));
    const r = noGrad(() => completionLogprobs(ref.model, batch));
    g.refLogprobs = g.completions.map(() => []);
    for (let t = 0; t < r.sequenceOf.length; t++) g.refLogprobs[r.sequenceOf[t]].push(r.tokenLogprobs.data[t]);
    g.refKl = g.completions.map((c, k) => {
      let kl = 0;
      for (let t = 0; t < c.logprobs.length; t++) {
        const d = (g.refLogprobs as number[][])[k][t] - c.logprobs[t];
        kl += Math.exp(d) - d - 1;
      }
      return kl;
    });
    g.refNll = (g.refLogprobs as number[][]).map((lp) => (lp.length ? -lp.reduce((a, b) => a + b, 0) / lp.length : 0));
  }

  /**
   * One optimizer step per minibatch (spec §1.9): zero grads; for each sample backprop
   * loss(s)/|minibatch|; clip; step.
   */
  update(minibatches: LossSample[][]): UpdateStats {
    const stats = { loss: 0, gradNorm: 0, entropy: 0, completionLength: 0, steps: 0, lr: this.opt.lr };
    let tokens = 0;
    let seqs = 0;
    for (const mb of minibatches) {
      this.opt.zeroGrad();
      // The minibatch loss is the mean of its sample losses: exactly what is differentiated.
      let mbLoss = 0;
      for (const s of mb) {
        const r = this.sampleLoss(s, 1 / mb.length);
        if (r === null) continue;
        mbLoss += r.loss / mb.length;
        stats.entropy += r.entropySum;
        tokens += r.tokens;
        seqs += s.completions.length;
      }
      this.opt.lr =
        this.spec.lr * lrMultiplier(this.steps, { kind: this.spec.lrScheduler, warmupSteps: this.spec.warmupSteps, totalSteps: this.spec.totalSteps });
      const norm = this.spec.maxGradNorm === null ? gradNorm(this.opt.params) : clipGradNorm(this.opt.params, this.spec.maxGradNorm);
      if (!Number.isFinite(norm)) throw new Error(`agent ${this.spec.index}: gradient norm is ${norm}; refusing to update (check rewards and learning rate)`);
      this.opt.step();
      this.steps++;
      stats.loss += mbLoss;
      stats.gradNorm += norm;
      stats.steps++;
      stats.lr = this.opt.lr;
    }
    const n = Math.max(stats.steps, 1);
    return {
      ...stats,
      loss: stats.loss / n,
      gradNorm: stats.gradNorm / n,
      entropy: tokens ? stats.entropy / tokens : 0,
      completionLength: seqs ? tokens / seqs : 0,
    };
  }

  /**
   * −Σ_g A_g · log π(c_g | p) / #scored, aggregated per `lossAggregation`, with the optional PPO
   * clipped ratio and KL loss term; backpropagated × `weight`. Returns null if nothing is scored.
   */
  private sampleLoss(s: LossSample, weight: number): { loss: number; entropySum: number; tokens: number } | null {
    const batch = s.completions.map((c) => ({ prompt: s.promptIds, completion: c })).filter((b) => b.completion.length > 0);
    const adv = s.completions.map((_, g) => s.advantages[g]).filter((_, g) => s.completions[g].length > 0);
    const old = s.oldLogprobs.filter((_, g) => s.completions[g].length > 0);
    const ref = s.refLogprobs?.filter((_, g) => s.completions[g].length > 0);
    if (batch.length === 0) return null;
    const lp = completionLogprobs(this.lm.model, batch, { entropy: true });
    const R = lp.sequenceOf.length;
    // c[t]: weight of token t in its sequence's aggregate, already divided by #scored sequences.
    const c = new Float64Array(R);
    const A = new Float64Array(R);
    const oldFlat = new Float64Array(R);
    const refFlat = new Float64Array(R);
    const pos = new Array<number>(batch.length).fill(0);
    for (let t = 0; t < R; t++) {
      const g = lp.sequenceOf[t];
      const len = lp.lengths[g];
      const agg = this.spec.lossAggregation === 'sequence_sum' ? 1 : this.spec.lossAggregation === 'token_mean' ? 1 / len : 1 / this.spec.maxNewTokens;
      c[t] = (agg / batch.length) * weight;
      A[t] = adv[g];
      oldFlat[t] = old[g][pos[g]] ?? 0;
      refFlat[t] = ref?.[g]?.[pos[g]] ?? 0;
      pos[g]++;
    }
    let loss: Tensor;
    if (this.spec.ppoClipEps === null) {
      loss = weightedSum(
        lp.tokenLogprobs,
        c.map((ct, t) => -ct * A[t]),
      );
    } else {
      const eps = this.spec.ppoClipEps;
      const ratio = exp(sub(lp.tokenLogprobs, tensor(oldFlat)));
      const At = tensor(A);
      loss = weightedSum(
        minimum(mul(ratio, At), mul(clamp(ratio, 1 - eps, 1 + eps), At)),
        c.map((ct) => -ct),
      );
    }
    if (this.spec.referenceKl?.mode === 'loss' && ref) {
      // β · Σ_t c_t · k3_t, k3 = exp(ref − logπ) − (ref − logπ) − 1, gradient through logπ only
      const d = sub(tensor(refFlat), lp.tokenLogprobs);
      const sumC = c.reduce((x, y) => x + y, 0);
      const kl = add(weightedSum(sub(exp(d), d), c), tensor([-sumC]));
      loss = add(loss, scale(kl, this.spec.referenceKl.coef));
    }
    const value = loss.item();
    if (!Number.isFinite(value)) throw new Error(`agent ${this.spec.index}: the loss is ${value}; check the reward values and the learning rate`);
    backward(loss);
    const entropySum = lp.entropy ? lp.entropy.reduce((a, b) => a + b, 0) : 0;
    return { loss: value / weight, entropySum, tokens: R };
  }

  // ---- checkpoints ------------------------------------------------------------------------

  /** Weights (HF folder, or LoRA adapter) + optimizer moments + RNG and step counter. */
  save(dir: string): void {
    mkdirSync(dir, { recursive: true });
    if (this.spec.lora) saveLora(this.lm.model, join(dir, 'adapter'), this.spec.modelDir);
    else this.lm.save(join(dir, 'model'));
    const st = this.opt.state();
    const tensors = new Map<string, { dtype: 'F32'; shape: number[]; data: Float32Array }>();
    for (const [name, b] of Object.entries(st.buffers)) {
      for (const [k, v] of Object.entries(b)) tensors.set(`${name}.${k}`, { dtype: 'F32', shape: [v.length], data: Float32Array.from(v) });
    }
    writeSafetensors(join(dir, 'optimizer.safetensors'), tensors);
    const state = { optimizer_step: st.step, agent_steps: this.steps, rng: this.rng.getState() };
    writeFileAtomic(join(dir, 'agent_state.json'), [`${JSON.stringify(state)}\n`]);
  }

  load(dir: string): void {
    noGrad(() => {
      if (this.spec.lora) loadLora(this.lm.model, join(dir, 'adapter'));
      else {
        const saved = LanguageModel.load(join(dir, 'model'));
        for (const [name, p] of this.lm.model.params) p.data.set(saved.model.param(name).data);
      }
    });
    const state = JSON.parse(readFileSync(join(dir, 'agent_state.json'), 'utf8')) as { optimizer_step: number; agent_steps: number; rng: RngState };
    const buffers: Record<string, Record<string, Float32Array>> = {};
    const file = join(dir, 'optimizer.safetensors');
    if (existsSync(file)) {
      for (const [key, t] of readSafetensors(file)) {
        const cut = key.lastIndexOf('.');
        const name = key.slice(0, cut);
        buffers[name] ??= {};
        buffers[name][key.slice(cut + 1)] = t.data as Float32Array;
      }
    }
    // LoRA adapters are new tensors after loading: rebuild the optimizer over them.
    if (this.spec.lora)
      this.opt = new AdamW(this.lm.model.trainableParams(), {
        lr: this.spec.lr,
        betas: this.spec.betas,
        eps: this.spec.eps,
        weightDecay: this.spec.weightDecay,
      });
    this.opt.loadState({ kind: 'adamw', step: state.optimizer_step, buffers });
    this.steps = state.agent_steps;
    this.rng.setState(state.rng);
  }
}
