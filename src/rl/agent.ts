/**
 * One agent of the team: its own model, tokenizer, optimizer, sampling RNG and, optionally, LoRA
 * adapters and a frozen reference copy. It does all model-side work of the trainer (sampling and
 * the policy-gradient update) and is driven through plain data, so the same class runs in-process
 * or inside a worker thread (rl/agent-pool.ts).
 */
import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { phase } from '../engine/profile.js';
import { Rng, type RngState } from '../engine/rng.js';
import { type BackendName, setBackend } from '../engine/runtime.js';
import { noGrad } from '../engine/tensor.js';
import { writeFileAtomic } from '../model/atomic-write.js';
import { type CompletionLogprobs, completionLogprobs, groupLogprobs } from '../model/logprobs.js';
import { applyLora, loadLora, saveLora } from '../model/lora.js';
import { LanguageModel } from '../model/pretrained.js';
import { sharedPrefill } from '../model/sample.js';
import type { Prompt } from '../model/tokenizer.js';
import type { CausalLM } from '../model/transformer.js';
import { ValueHead } from '../model/value-head.js';
import { klK3 } from './advantage.js';
import { type Learner, type LearnerSpec, LocalLearner, type LossSample } from './learner.js';
import { TisStats, tisWeights } from './off-policy.js';
import { createSampler, LocalSampler, type RolloutSpec, type SampledPrompt, type SampleRequest, type Sampler, type SamplingParams } from './sampler.js';
import { TorchLearner, type TorchLearnerSpec } from './torch-learner.js';

export type { LossSample } from './learner.js';
export type { SamplingParams } from './sampler.js';

/** Everything needed to build an agent; plain data so it can cross a worker boundary. */
export interface AgentSpec extends LearnerSpec {
  /** Seeds the agent's sampling RNG (and LoRA initialisation). */
  seed: number;
  /** Keep a frozen copy of the starting model to score each completion's NLL (fluency tracking). */
  trackReference?: boolean;
  /** Where completions are sampled (rl/sampler.ts); absent: in-process with the agent's own model. */
  rollout?: RolloutSpec;
  /** The gradient side (rl/learner.ts); absent: magrpo's own engine in-process. */
  learner?: TorchLearnerSpec;
  /** Kernel backend and thread count inside a worker (in-process agents share the main one). */
  backend?: BackendName;
  threads?: number;
}

export interface SampledGroup {
  /** The formatted prompt as the agent got it (text or chat messages); `promptIds` are its tokens. */
  prompt: Prompt;
  promptIds: number[];
  /**
   * `logprobs`: the learner's log π_old per token. A remote sampler's own log-probs are kept in
   * `samplerLogprobs` (empty when it gave none per token) for the off-policy correction.
   */
  completions: { ids: number[]; text: string; logprobs: number[]; samplerLogprobs?: number[] }[];
  /** Per completion: Σ_t log π_ref(token), present when a reference model exists. */
  refLogprobs?: number[][];
  /** Per completion: k3 KL estimate vs the reference, summed over tokens. */
  refKl?: number[];
  /** Per completion: mean per-token NLL under the reference (the frozen starting model). */
  refNll?: number[];
  /** Per completion: the value head's output at sampling time (actor-critic agents). */
  values?: number[];
}

export interface UpdateStats {
  loss: number;
  gradNorm: number;
  entropy: number;
  completionLength: number;
  steps: number;
  lr: number;
  /** Actor-critic: the value error, mean over the update's optimizer steps (absent without a critic). */
  valueLoss?: number;
  /** Remote-rollout metrics (sampler vs learner log-probs, importance weights, sampler counters). */
  rollout?: Record<string, number>;
}

/** Log-probs of a group's completions without gradients: its prompt run once (unless MAGRPO_SHARED_PREFILL=0). */
function scoreGroup(model: CausalLM, prompt: number[], completions: number[][]): CompletionLogprobs {
  return sharedPrefill()
    ? groupLogprobs(model, prompt, completions)
    : completionLogprobs(
        model,
        completions.map((c) => ({ prompt, completion: c })),
      );
}

/**
 * LoRA agents of one thread on the same base model read one copy of its weights (frozen, so
 * sharing cannot change what any agent computes), each with adapters of its own.
 */
const frozenBases = new Map<string, WeakRef<LanguageModel>>();

function frozenBase(modelDir: string): LanguageModel {
  // The path and its files' modification times: a folder rewritten in place is loaded afresh.
  const weights = ['model.safetensors', 'model.safetensors.index.json'].map((f) => join(modelDir, f)).find(existsSync);
  const key = [resolve(modelDir), statSync(modelDir).mtimeMs, weights ? statSync(weights).mtimeMs : ''].join('|');
  const base = frozenBases.get(key)?.deref();
  if (base) return withModel(base, base.model.sharedBase());
  const lm = LanguageModel.load(modelDir);
  for (const p of lm.model.params.values()) p.requiresGrad = false;
  frozenBases.set(key, new WeakRef(lm));
  return lm;
}

function withModel(lm: LanguageModel, model: CausalLM): LanguageModel {
  return new LanguageModel(model, lm.tokenizer, lm.generation, lm.source);
}

export class PolicyAgent {
  readonly lm: LanguageModel;
  private readonly ref: LanguageModel | null;
  readonly rng: Rng;
  /** Computes gradients and updates the weights: this process (LocalLearner) or a PyTorch learner. */
  readonly learner: Learner;
  private steps = 0;
  /** Learning rate of the last optimizer step (the base rate before the first). */
  private lr: number;
  /** Where completions come from (in-process, or inference servers that get each new adapter). */
  readonly sampler: Sampler;
  /** The optimizer step whose weights the sampler has (-1: none yet). */
  private samplerStep = -1;
  /** |Δ log p| between sampler and learner, and importance weights, over an update. */
  private readonly tis = new TisStats();
  /** The critic of actor-critic algorithms (spec.critic), trained with this agent's weights. */
  readonly valueHead: ValueHead | null;

  constructor(readonly spec: AgentSpec) {
    if (spec.backend) setBackend(spec.backend);
    this.lm = spec.lora ? frozenBase(spec.modelDir) : LanguageModel.load(spec.modelDir);
    this.rng = new Rng(spec.seed);
    if (spec.lora) applyLora(this.lm.model, { r: spec.lora.r, alpha: spec.lora.alpha, targetModules: spec.lora.target_modules }, this.rng);
    // Under LoRA the starting model is the frozen base itself: the reference reads its weights.
    const tracked = spec.referenceKl || spec.trackReference;
    this.ref = !tracked ? null : spec.lora ? withModel(this.lm, this.lm.model.sharedBase()) : LanguageModel.load(spec.modelDir);
    if (this.ref) for (const p of this.ref.model.params.values()) p.requiresGrad = false;
    this.lr = spec.lr;
    // Its own seed stream: the sampling RNG's draws stay those of an agent without a head.
    this.valueHead = spec.critic ? new ValueHead(this.lm.model.config.hiddenSize, new Rng((spec.seed ^ 0x9e3779b9) >>> 0)) : null;
    this.learner = spec.learner ? new TorchLearner(spec, this.lm, spec.learner, { head: this.valueHead }) : new LocalLearner(spec, this.lm, this.valueHead);
    this.sampler = createSampler(spec.rollout, this.lm, this.rng);
  }

  /**
   * Samples `n` completions for each prompt through the sampler. Remote completions are re-scored
   * with this agent's own model, so the loss uses learner log-probs; the sampler's are kept.
   */
  async sample(requests: SampleRequest[], params: SamplingParams): Promise<SampledGroup[]> {
    await this.syncSampler();
    return this.groups(requests, await this.sampler.generate(requests, params));
  }

  /**
   * `sample` for several agents of this thread at once: in one batch when their models share a
   * base (LocalSampler.generateTogether), else each through its own sampler. Per agent, in order.
   */
  static async sampleEach(agents: readonly PolicyAgent[], requests: readonly SampleRequest[][], params: SamplingParams): Promise<SampledGroup[][]> {
    const together = LocalSampler.generateTogether(
      agents.map((a) => a.sampler),
      requests,
      params,
    );
    if (together === null) return Promise.all(agents.map((a, i) => a.sample(requests[i], params)));
    return agents.map((a, i) => a.groups(requests[i], together[i]));
  }

  /** The sampler's answers as groups, with what the learner needs of each: learner log-probs of remote samples, reference, values. */
  private groups(requests: readonly SampleRequest[], out: readonly SampledPrompt[]): SampledGroup[] {
    return out.map((o, k) => {
      const g: SampledGroup = { prompt: requests[k].prompt, promptIds: o.promptIds, completions: o.completions };
      if (this.sampler.kind !== 'local') this.rescore(g);
      if (this.ref) this.attachReference(g);
      if (this.valueHead) this.attachValues(g);
      return g;
    });
  }

  /** Gives a remote sampler the current weights (adapter `agent_<i>-v<step>`) if it does not have them yet. */
  async syncSampler(): Promise<void> {
    if (!this.sampler.loadWeights || this.samplerStep === this.steps) return;
    await this.sampler.loadWeights(`agent_${this.spec.index}-v${this.steps}`, (dir) => saveLora(this.lm.model, dir, this.spec.modelDir));
    this.samplerStep = this.steps;
  }

  /** Learner log-probs of remote completions (π_old for the loss); the sampler's move to samplerLogprobs. */
  private rescore(g: SampledGroup): void {
    const scored = g.completions.filter((c) => c.ids.length > 0);
    for (const c of g.completions) c.samplerLogprobs = c.logprobs;
    if (scored.length === 0) return;
    const r = phase('score/rescore', () =>
      noGrad(() =>
        scoreGroup(
          this.lm.model,
          g.promptIds,
          scored.map((c) => c.ids),
        ),
      ),
    );
    for (const c of scored) c.logprobs = [];
    for (let t = 0; t < r.sequenceOf.length; t++) scored[r.sequenceOf[t]].logprobs.push(r.tokenLogprobs.data[t]);
  }

  /** Reference log-probs, KL (k3, comlrl/utils/reference_kl.py) and mean NLL of each completion, no gradient. */
  private attachReference(g: SampledGroup): void {
    const ref = this.ref as LanguageModel;
    const r = phase('score/reference', () =>
      noGrad(() =>
        scoreGroup(
          ref.model,
          g.promptIds,
          g.completions.map((c) => c.ids),
        ),
      ),
    );
    g.refLogprobs = g.completions.map(() => []);
    for (let t = 0; t < r.sequenceOf.length; t++) g.refLogprobs[r.sequenceOf[t]].push(r.tokenLogprobs.data[t]);
    g.refKl = g.completions.map((c, k) => klK3(c.logprobs, (g.refLogprobs as number[][])[k]));
    g.refNll = (g.refLogprobs as number[][]).map((lp) => (lp.length ? -lp.reduce((a, b) => a + b, 0) / lp.length : 0));
  }

  /** V_old of each completion, no gradient: V(h) of the prompt (one for all), or Q(h, a) of prompt + completion. */
  private attachValues(g: SampledGroup): void {
    const head = this.valueHead as ValueHead;
    const model = this.lm.model;
    g.values = phase('score/value', () =>
      noGrad(() => {
        if (this.spec.critic?.type === 'q') return g.completions.map((c) => head.value(model, [...g.promptIds, ...c.ids]).data[0]);
        const v = head.value(model, g.promptIds).data[0];
        return g.completions.map(() => v);
      }),
    );
  }

  /**
   * Σ_t log π(token) of each completion of each sample under the current weights, without
   * gradient (an empty completion: 0). Offline algorithms read the whole team's before a step.
   */
  sequenceLogprobs(samples: readonly { promptIds: number[]; completions: number[][] }[]): number[][] {
    return samples.map((s) => {
      const scored = s.completions.flatMap((c, g) => (c.length > 0 ? [g] : []));
      const sums = s.completions.map(() => 0);
      if (scored.length === 0) return sums;
      const r = noGrad(() =>
        scoreGroup(
          this.lm.model,
          s.promptIds,
          scored.map((g) => s.completions[g]),
        ),
      );
      for (let t = 0; t < r.sequenceOf.length; t++) sums[scored[r.sequenceOf[t]]] += r.tokenLogprobs.data[t];
      return sums;
    });
  }

  /**
   * One optimizer step per minibatch (CoMLRL `_update_from_samples`), through the learner: forward_backward on the
   * minibatch (the mean of its sample losses), then optim_step (schedule, clip, AdamW). A remote
   * learner's new weights are then copied into this agent's model, which samples.
   */
  async update(minibatches: LossSample[][]): Promise<UpdateStats> {
    const stats = { loss: 0, gradNorm: 0, entropy: 0, completionLength: 0, steps: 0, lr: this.lr };
    let tokens = 0;
    let seqs = 0;
    let valueLoss: number | undefined;
    for (const mb of minibatches) {
      const fb = await this.learner.forwardBackward(mb.map((s) => this.withTokenWeights(s)));
      const st = await this.learner.optimStep();
      this.steps++;
      this.lr = st.lr;
      stats.loss += fb.loss;
      if (fb.valueLoss !== undefined) valueLoss = (valueLoss ?? 0) + fb.valueLoss;
      stats.entropy += fb.entropySum;
      tokens += fb.tokens;
      seqs += fb.sequences;
      stats.gradNorm += st.gradNorm;
      stats.steps++;
      stats.lr = st.lr;
    }
    this.learner.releaseMemory?.();
    if (this.learner instanceof TorchLearner && minibatches.length > 0) {
      const dir = await this.learner.pullWeights();
      this.loadWeights(dir, this.spec.lora !== null);
      this.valueHead?.load(dir);
    }
    const n = Math.max(stats.steps, 1);
    return {
      ...stats,
      loss: stats.loss / n,
      gradNorm: stats.gradNorm / n,
      entropy: tokens ? stats.entropy / tokens : 0,
      completionLength: seqs ? tokens / seqs : 0,
      ...(valueLoss === undefined ? {} : { valueLoss: valueLoss / n }),
      ...(this.sampler.kind === 'local' ? {} : { rollout: this.rolloutStats() }),
    };
  }

  /** Sampler-vs-learner metrics of the update and the sampler's own counters. */
  private rolloutStats(): Record<string, number> {
    return { ...this.sampler.takeStats?.(), ...this.tis.take() };
  }

  /**
   * The sample with truncated importance-sampling weights per token (rl/off-policy.ts) when a
   * remote sampler gave its own log-probs; unchanged otherwise.
   */
  private withTokenWeights(s: LossSample): LossSample {
    const samplerLp = s.samplerLogprobs;
    if (!samplerLp) return s;
    const scored = s.completions.flatMap((c, g) => (c.length > 0 ? [g] : []));
    const sequenceOf = Int32Array.from(scored.flatMap((g, b) => s.completions[g].map(() => b)));
    const w = tisWeights(
      scored.map((g) => samplerLp[g]),
      scored.map((g) => s.oldLogprobs[g]),
      sequenceOf,
      this.spec.rollout?.tis_cap ?? null,
      this.tis,
    );
    if (w === null) return s;
    const tokenWeights: number[][] = s.completions.map(() => []);
    for (let t = 0; t < w.length; t++) tokenWeights[scored[sequenceOf[t]]].push(w[t]);
    return { ...s, tokenWeights };
  }

  // ---- checkpoints ------------------------------------------------------------------------

  /** Weights (HF folder, or LoRA adapter) + the learner's state (optimizer moments, steps) + RNG and step counter. */
  async save(dir: string): Promise<void> {
    mkdirSync(dir, { recursive: true });
    const weights = join(dir, this.spec.lora ? 'adapter' : 'model');
    if (this.spec.lora) saveLora(this.lm.model, weights, this.spec.modelDir);
    else this.lm.save(weights);
    this.valueHead?.save(weights);
    await this.learner.saveState(dir);
    const state = { agent_steps: this.steps, lr: this.lr, rng: this.rng.getState() };
    writeFileAtomic(join(dir, 'agent_state.json'), [`${JSON.stringify(state)}\n`]);
  }

  async load(dir: string): Promise<void> {
    this.loadWeights(join(dir, this.spec.lora ? 'adapter' : 'model'), this.spec.lora !== null);
    this.valueHead?.load(join(dir, this.spec.lora ? 'adapter' : 'model'));
    await this.learner.loadState(dir);
    const state = JSON.parse(readFileSync(join(dir, 'agent_state.json'), 'utf8')) as { agent_steps: number; lr?: number; rng: RngState };
    this.steps = state.agent_steps;
    if (state.lr !== undefined) this.lr = state.lr;
    this.rng.setState(state.rng);
  }

  /** Replaces this agent's weights by a LoRA adapter folder or a HF model folder. */
  private loadWeights(dir: string, lora: boolean): void {
    noGrad(() => {
      if (lora) loadLora(this.lm.model, dir);
      else {
        const saved = LanguageModel.load(dir);
        for (const [name, p] of this.lm.model.params) p.data.set(saved.model.param(name).data);
      }
    });
  }
}
