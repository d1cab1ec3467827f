/**
 * The learner protocol: the gradient half of training, split Tinker-style from sampling.
 * `forwardBackward` scores a minibatch and accumulates its gradient, `optimStep` clips, applies
 * the LR schedule and takes one AdamW step, `saveAdapter` writes the weights for inference servers,
 * `saveState`/`loadState` carry everything needed for an exact resume. `LocalLearner` is magrpo's
 * own engine in-process; `TorchLearner` (rl/torch-learner.ts) speaks the same protocol to a
 * PyTorch process (learner/). The agent drives either one the same way (rl/agent.ts `update`).
 */
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BufferPool } from '../engine/buffer-pool.js';
import { AdamW, clipGradNorm, gradNorm, lrMultiplier, type ScheduleKind } from '../engine/optim.js';
import { phase } from '../engine/profile.js';
import { backward } from '../engine/tensor.js';
import { writeFileAtomic } from '../model/atomic-write.js';
import { completionLogprobs, groupLogprobs } from '../model/logprobs.js';
import { saveLora } from '../model/lora.js';
import type { LanguageModel } from '../model/pretrained.js';
import { readSafetensors, writeSafetensors } from '../model/safetensors.js';
import { sharedPrefill } from '../model/sample.js';
import type { ValueHead } from '../model/value-head.js';
import type { LossSample, LossSettings } from './algorithms/algorithm.js';
import { algorithmNamed } from './algorithms/index.js';

/** Optimizer and loss settings of one agent's learner; plain data (it crosses worker and process boundaries). */
export interface LearnerSpec extends LossSettings {
  modelDir: string;
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
}

export type { LossSample } from './algorithms/algorithm.js';

/** What one `forwardBackward` measured. */
export interface ForwardBackwardResult {
  /** The minibatch loss that was differentiated: the mean of its samples' losses. */
  loss: number;
  /** Per sample, per completion, per token: log π(token) under the current weights (empty completions: []). */
  logprobs: number[][][];
  /** Σ over scored tokens of the predictive entropy (a metric, no gradient). */
  entropySum: number;
  /** Scored completion tokens. */
  tokens: number;
  /** Completions of the samples that had a scored token (their empty completions included). */
  sequences: number;
  /** Mean k3 KL per scored token against the reference log-probs (null without them). */
  kl: number | null;
  /** Fraction of scored tokens whose PPO term was clipped (0 without clipping). */
  clipFraction: number;
  /** Actor-critic: the mean over the minibatch of the samples' value errors (absent without a critic). */
  valueLoss?: number;
}

/** What one `optimStep` did. */
export interface OptimStepResult {
  /** Global L2 gradient norm before clipping. */
  gradNorm: number;
  /** Learning rate of this step (after the schedule). */
  lr: number;
  /** Optimizer steps taken so far, this one included. */
  step: number;
}

/** The gradient side of one agent. Calls are issued one at a time, in order. */
export interface Learner {
  /** 'local' (this process) or 'torch' (a PyTorch learner process). */
  readonly kind: 'local' | 'torch';
  /** Scores `samples` as one minibatch (mean of sample losses) and adds its gradient to the accumulated one. */
  forwardBackward(samples: LossSample[]): Promise<ForwardBackwardResult>;
  /** Clips, sets the scheduled LR, takes one AdamW step and zeroes the gradients. Refuses non-finite norms. */
  optimStep(): Promise<OptimStepResult>;
  /** Writes the trainable weights: a PEFT adapter folder with LoRA, a HF model folder without. */
  saveAdapter(dir: string): Promise<void>;
  /** Writes the optimizer moments and step counters (not the weights, which the agent saves). */
  saveState(dir: string): Promise<void>;
  /** Reads what `saveState` wrote; the weights must already be loaded. */
  loadState(dir: string): Promise<void>;
  close(): Promise<void>;
  /** Lets go of memory kept for the next forwardBackward (the local learner's activation buffers); the agent calls it when an update ends. */
  releaseMemory?(): void;
}

/**
 * Activation buffers kept from one minibatch to the next, one pool for every local learner of the
 * thread: in-process agents update in turns, minibatch by minibatch (rl/agent-pool.ts), so an
 * agent's graph takes the buffers the previous agent's backward gave back instead of allocating a
 * set of its own while the other set waits in its owner's pool.
 */
const threadBuffers = new BufferPool();
/** Local learners of this thread inside an update (from forwardBackward to releaseMemory). */
const updating = new Set<LocalLearner>();

/**
 * The embedded engine as a learner: gradients of `lm` in this process, AdamW over its trainable
 * parameters and, for actor-critic algorithms, the value head's (one optimizer, one step for both).
 */
export class LocalLearner implements Learner {
  readonly kind = 'local';
  private opt: AdamW;
  private steps = 0;

  constructor(
    private readonly spec: LearnerSpec,
    private readonly lm: LanguageModel,
    private readonly head: ValueHead | null = null,
  ) {
    if ((spec.critic ?? null) !== null && head === null) throw new Error(`agent ${spec.index}: the algorithm trains a value head and none was given`);
    this.opt = this.newOptimizer();
  }

  private newOptimizer(): AdamW {
    const s = this.spec;
    return new AdamW([...this.lm.model.trainableParams(), ...(this.head?.params() ?? [])], {
      lr: s.lr,
      betas: s.betas,
      eps: s.eps,
      weightDecay: s.weightDecay,
    });
  }

  /** The AdamW instance (its moments and step count), for tests and diagnostics. */
  get optimizer(): AdamW {
    return this.opt;
  }

  async forwardBackward(samples: LossSample[]): Promise<ForwardBackwardResult> {
    const out: ForwardBackwardResult = { loss: 0, logprobs: [], entropySum: 0, tokens: 0, sequences: 0, kl: null, clipFraction: 0 };
    let klSum = 0;
    let klTokens = 0;
    let clipped = 0;
    for (const s of samples) {
      updating.add(this);
      const r = threadBuffers.use(() => this.sampleLoss(s, 1 / samples.length));
      out.logprobs.push(r?.logprobs ?? s.completions.map(() => []));
      if (r === null) continue;
      out.loss += r.loss / samples.length;
      out.entropySum += r.entropySum;
      out.tokens += r.tokens;
      out.sequences += r.sequences;
      clipped += r.clipped;
      if (r.valueLoss !== undefined) out.valueLoss = (out.valueLoss ?? 0) + r.valueLoss / samples.length;
      if (r.klTokens > 0) {
        klSum += r.klSum;
        klTokens += r.klTokens;
      }
    }
    out.kl = klTokens > 0 ? klSum / klTokens : null;
    out.clipFraction = out.tokens > 0 ? clipped / out.tokens : 0;
    return out;
  }

  async optimStep(): Promise<OptimStepResult> {
    const s = this.spec;
    this.opt.lr = s.lr * lrMultiplier(this.steps, { kind: s.lrScheduler, warmupSteps: s.warmupSteps, totalSteps: s.totalSteps });
    const norm = phase('update/optimizer', () => {
      const n = s.maxGradNorm === null ? gradNorm(this.opt.params) : clipGradNorm(this.opt.params, s.maxGradNorm);
      if (!Number.isFinite(n)) throw new Error(`agent ${s.index}: gradient norm is ${n}; refusing to update (check rewards and learning rate)`);
      this.opt.step();
      this.opt.zeroGrad();
      return n;
    });
    this.steps++;
    return { gradNorm: norm, lr: this.opt.lr, step: this.steps };
  }

  /**
   * −Σ_g A_g · log π(c_g | p) / #scored, aggregated per `lossAggregation`, with the optional PPO
   * clipped ratio, per-token weights and KL loss term; backpropagated × `weight`. Null if nothing is scored.
   */
  private sampleLoss(s: LossSample, weight: number) {
    const scored = s.completions.flatMap((c, g) => (c.length > 0 ? [g] : []));
    // An empty completion still has a value to regress (actor-critic).
    if (scored.length === 0 && this.head === null) return null;
    const f = phase('update/forward', () => this.lossGraph(s, scored, weight));
    // Read before backward: inside the buffer pool, backward recycles the graph's activations.
    const logprobs: number[][] = s.completions.map(() => []);
    for (let t = 0; t < f.tokens; t++) logprobs[f.sequenceOf[t]].push(f.tokenLogprobs[t]);
    phase('update/backward', () => backward(f.loss));
    return {
      loss: f.value / weight,
      entropySum: f.entropySum,
      tokens: f.tokens,
      sequences: s.completions.length,
      logprobs,
      clipped: f.clipped,
      valueLoss: f.valueLoss,
      klSum: f.klSum,
      klTokens: f.klTokens,
    };
  }

  /**
   * The loss graph of one sample (forward only) and what is read from it before backward. The G
   * completions share their prompt, which runs once (model/logprobs.ts groupLogprobs) unless
   * shared prefill is off (MAGRPO_SHARED_PREFILL=0: every completion as its own sequence).
   */
  private lossGraph(s: LossSample, scored: number[], weight: number) {
    const model = this.lm.model;
    const lp = sharedPrefill()
      ? groupLogprobs(model, s.promptIds, s.completions, { entropy: true })
      : completionLogprobs(
          model,
          s.completions.map((completion) => ({ prompt: s.promptIds, completion })),
          { entropy: true },
        );
    const critic = this.spec.critic ?? null;
    // V(h) reads the prompt alone, Q(h, a) the prompt and the completion: separate forwards, as the reference's.
    const values =
      this.head && critic
        ? s.completions.map((c) => (this.head as ValueHead).value(model, critic.type === 'v' ? s.promptIds : [...s.promptIds, ...c]))
        : undefined;
    // The run's algorithm turns the scored tokens into this sample's loss (rl/algorithms/).
    const { loss, clipped, klSum, klTokens, valueLoss } = algorithmNamed(this.spec.algorithm).loss(
      { ...lp, scored: scored.length, values },
      s,
      this.spec,
      weight,
    );
    const R = lp.sequenceOf.length;
    const value = loss.item();
    if (!Number.isFinite(value)) throw new Error(`agent ${this.spec.index}: the loss is ${value}; check the reward values and the learning rate`);
    const entropySum = lp.entropy ? lp.entropy.reduce((a, b) => a + b, 0) : 0;
    return { loss, value, entropySum, tokens: R, sequenceOf: lp.sequenceOf, tokenLogprobs: lp.tokenLogprobs.data, clipped, klSum, klTokens, valueLoss };
  }

  /** Ends this learner's update; the thread's pool is emptied once no learner is inside one. */
  releaseMemory(): void {
    updating.delete(this);
    if (updating.size === 0) threadBuffers.clear();
  }

  async saveAdapter(dir: string): Promise<void> {
    if (this.spec.lora) saveLora(this.lm.model, dir, this.spec.modelDir);
    else this.lm.save(dir);
  }

  async saveState(dir: string): Promise<void> {
    mkdirSync(dir, { recursive: true });
    const st = this.opt.state();
    const tensors = new Map<string, { dtype: 'F32'; shape: number[]; data: Float32Array }>();
    for (const [name, b] of Object.entries(st.buffers)) {
      for (const [k, v] of Object.entries(b)) tensors.set(`${name}.${k}`, { dtype: 'F32', shape: [v.length], data: Float32Array.from(v) });
    }
    writeSafetensors(join(dir, 'optimizer.safetensors'), tensors);
    writeFileAtomic(join(dir, LOCAL_STATE), [`${JSON.stringify({ optimizer_step: st.step, steps: this.steps })}\n`]);
  }

  async loadState(dir: string): Promise<void> {
    // Checkpoints written before the learner split keep the counters in agent_state.json.
    const stateFile = existsSync(join(dir, LOCAL_STATE)) ? join(dir, LOCAL_STATE) : join(dir, 'agent_state.json');
    const state = JSON.parse(readFileSync(stateFile, 'utf8')) as { optimizer_step: number; steps?: number; agent_steps?: number };
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
    if (this.spec.lora) this.opt = this.newOptimizer();
    this.opt.loadState({ kind: 'adamw', step: state.optimizer_step, buffers });
    this.steps = state.steps ?? state.agent_steps ?? state.optimizer_step;
  }

  async close(): Promise<void> {}
}

const LOCAL_STATE = 'learner_state.json';
