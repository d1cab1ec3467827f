/**
 * Critic models apart from the actors (algorithm.criticModel): IAC's separate critic, one per
 * agent (CoMLRL IACTrainer with use_separate_critic), and MAAC's one shared critic over joint
 * prompts (CoMLRL MAACTrainer). A critic is a copy of a starting model (LoRA adapters of its own
 * under `lora`) with a value head (model/value-head.ts) and its own AdamW; it lives in the
 * trainer's thread, values every tree node right after sampling (V_old) and steps on the
 * minibatches its actors stepped on, after them. Actor and critic losses share no parameter, so
 * the order of the two steps does not change either.
 *
 * The gradient side follows `learner.backend`: local, its own AdamW here; torch, the PyTorch
 * learner holds the critic (`create_agent` with `critic: true` and a value head: its weights, head
 * and AdamW), steps it with `value_forward_backward` + `optim_step`, and the weights are pulled
 * back here after each drain, where V_old is read (as the actors' weights are for sampling).
 *
 * Saved beside its agent's weights: `<agent_i>/critic/` (IAC) or `<checkpoint>/critic/` (MAAC),
 * each holding `model/` or `adapter/` with value_head.safetensors, critic_state.json and the
 * optimizer state (optimizer.safetensors, or the PyTorch learner's torch_learner.pt), so a resume
 * continues the same run.
 */
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { add, clamp, scale, square, sub } from '../engine/ops.js';
import { AdamW, clipGradNorm, gradNorm, lrMultiplier } from '../engine/optim.js';
import { phase } from '../engine/profile.js';
import { Rng } from '../engine/rng.js';
import { backward, noGrad, type Tensor, tensor } from '../engine/tensor.js';
import { writeFileAtomic } from '../model/atomic-write.js';
import { applyLora, loadLora, saveLora } from '../model/lora.js';
import { LanguageModel } from '../model/pretrained.js';
import { readSafetensors, writeSafetensors } from '../model/safetensors.js';
import { ValueHead } from '../model/value-head.js';
import type { AgentSpec, LossSample } from './agent.js';
import type { AgentHandle } from './agent-pool.js';
import type { CriticModelSettings, ScoredNode } from './algorithms/algorithm.js';
import { jointCriticText } from './algorithms/maac.js';
import { postOrder, type TreeNode } from './rollout.js';
import { promptText } from './task.js';
import { type ValueExample as CriticExample, TorchLearner } from './torch-learner.js';

/**
 * One critic model: weights, value head, AdamW at its own learning rate, the actors' LR schedule
 * and clipping; in this thread (local) or in the PyTorch learner (torch, `remote`).
 */
export class CriticModel {
  readonly lm: LanguageModel;
  readonly head: ValueHead;
  /** Local: its AdamW (null when the PyTorch learner holds the optimizer). */
  private opt: AdamW | null;
  private steps = 0;
  /** learner.backend torch: the critic's gradient side, in the PyTorch learner. */
  readonly remote: TorchLearner | null;
  /** The remote critic stepped since its weights were last pulled here. */
  private stale = false;

  constructor(
    private readonly spec: AgentSpec,
    readonly settings: CriticModelSettings,
  ) {
    this.lm = LanguageModel.load(spec.modelDir);
    const rng = new Rng((spec.seed ^ 0x85ebca6b) >>> 0);
    if (spec.lora) applyLora(this.lm.model, { r: spec.lora.r, alpha: spec.lora.alpha, targetModules: spec.lora.target_modules }, rng);
    this.head = new ValueHead(this.lm.model.config.hiddenSize, rng);
    this.opt = spec.learner ? null : this.newOptimizer();
    const critic = { type: settings.type, valueClipRange: settings.valueClipRange, valueLossCoef: settings.valueLossCoef };
    this.remote = spec.learner ? new TorchLearner({ ...spec, lr: this.lr, critic }, this.lm, spec.learner, { head: this.head, critic: true }) : null;
  }

  private get lr(): number {
    return this.settings.lr ?? this.spec.lr;
  }

  private newOptimizer(): AdamW {
    const s = this.spec;
    return new AdamW([...this.lm.model.trainableParams(), ...this.head.params()], { lr: this.lr, betas: s.betas, eps: s.eps, weightDecay: s.weightDecay });
  }

  /** The AdamW instance (its moments and step count), for tests; a remote critic's is the PyTorch learner's. */
  get optimizer(): AdamW {
    if (!this.opt) throw new Error(`critic of agent ${this.spec.index}: its optimizer is in the PyTorch learner (torch_learner.pt)`);
    return this.opt;
  }

  /** The head's value of each input under the current weights, no gradient. */
  values(inputs: readonly number[][]): number[] {
    return phase('score/critic', () => noGrad(() => inputs.map((ids) => this.head.value(this.lm.model, ids).data[0])));
  }

  /**
   * One AdamW step on coef · mean_b error_b, error = (t − V)², or with value_clip_range ε
   * max((t − V)², (t − V_old − clip(V − V_old, ±ε))²). Returns the mean error and the gradient norm.
   */
  async step(batch: readonly CriticExample[]): Promise<{ valueLoss: number; gradNorm: number }> {
    if (this.remote) {
      const { valueLoss } = await this.remote.valueForwardBackward(batch);
      const { gradNorm } = await this.remote.optimStep();
      this.steps++;
      this.stale = true;
      return { valueLoss, gradNorm };
    }
    const { valueClipRange: eps, valueLossCoef } = this.settings;
    let valueLoss = 0;
    phase('update/critic', () => {
      for (const x of batch) {
        const V = this.head.value(this.lm.model, x.input);
        const target = tensor([x.target]);
        let err: Tensor = square(sub(V, target));
        if (eps !== null) {
          const old = tensor([x.oldValue]);
          const clipped = square(sub(add(old, clamp(sub(V, old), -eps, eps)), target));
          // max of the two: where they tie (V inside the clip range) both have the same gradient
          if (clipped.data[0] > err.data[0]) err = clipped;
        }
        if (!Number.isFinite(err.data[0])) throw new Error(`critic of agent ${this.spec.index}: the value loss is ${err.data[0]}`);
        valueLoss += err.data[0] / batch.length;
        backward(scale(err, valueLossCoef / batch.length));
      }
    });
    const s = this.spec;
    const opt = this.optimizer;
    opt.lr = this.lr * lrMultiplier(this.steps, { kind: s.lrScheduler, warmupSteps: s.warmupSteps, totalSteps: s.totalSteps });
    const norm = s.maxGradNorm === null ? gradNorm(opt.params) : clipGradNorm(opt.params, s.maxGradNorm);
    if (!Number.isFinite(norm)) throw new Error(`critic of agent ${s.index}: gradient norm is ${norm}; refusing to update`);
    opt.step();
    opt.zeroGrad();
    this.steps++;
    return { valueLoss, gradNorm: norm };
  }

  /** A remote critic's weights (and head), pulled here after it stepped: V_old is read from them. */
  async sync(): Promise<void> {
    if (!this.remote || !this.stale) return;
    this.loadWeights(await this.remote.pullWeights());
    this.stale = false;
  }

  /** Weights and head from a folder: a LoRA adapter folder or a HF model folder, with value_head.safetensors. */
  private loadWeights(dir: string): void {
    noGrad(() => {
      if (this.spec.lora) loadLora(this.lm.model, dir);
      else {
        const saved = LanguageModel.load(dir);
        for (const [name, p] of this.lm.model.params) p.data.set(saved.model.param(name).data);
      }
    });
    this.head.load(dir);
  }

  async save(dir: string): Promise<void> {
    await this.sync();
    mkdirSync(dir, { recursive: true });
    const weights = join(dir, this.spec.lora ? 'adapter' : 'model');
    if (this.spec.lora) saveLora(this.lm.model, weights, this.spec.modelDir);
    else this.lm.save(weights);
    this.head.save(weights);
    if (this.remote) {
      await this.remote.saveState(dir);
      writeFileAtomic(join(dir, CRITIC_STATE), [`${JSON.stringify({ steps: this.steps })}\n`]);
      return;
    }
    const st = this.optimizer.state();
    const tensors = new Map<string, { dtype: 'F32'; shape: number[]; data: Float32Array }>();
    for (const [name, b] of Object.entries(st.buffers))
      for (const [k, v] of Object.entries(b)) tensors.set(`${name}.${k}`, { dtype: 'F32', shape: [v.length], data: Float32Array.from(v) });
    writeSafetensors(join(dir, 'optimizer.safetensors'), tensors);
    writeFileAtomic(join(dir, CRITIC_STATE), [`${JSON.stringify({ optimizer_step: st.step, steps: this.steps })}\n`]);
  }

  async load(dir: string): Promise<void> {
    if (!existsSync(join(dir, CRITIC_STATE))) throw new Error(`${dir}: no ${CRITIC_STATE} (the critic of an actor-critic run)`);
    const weights = join(dir, this.spec.lora ? 'adapter' : 'model');
    this.loadWeights(weights);
    const state = JSON.parse(readFileSync(join(dir, CRITIC_STATE), 'utf8')) as { optimizer_step: number; steps: number };
    if (this.remote) {
      // torch_learner.pt holds the weights too: the learner continues from the saved critic
      await this.remote.loadState(dir);
      this.steps = state.steps;
      this.stale = false;
      return;
    }
    const buffers: Record<string, Record<string, Float32Array>> = {};
    for (const [key, t] of readSafetensors(join(dir, 'optimizer.safetensors'))) {
      const cut = key.lastIndexOf('.');
      buffers[key.slice(0, cut)] ??= {};
      buffers[key.slice(0, cut)][key.slice(cut + 1)] = t.data as Float32Array;
    }
    // LoRA adapters are new tensors after loading: rebuild the optimizer over them.
    if (this.spec.lora) this.opt = this.newOptimizer();
    this.optimizer.loadState({ kind: 'adamw', step: state.optimizer_step, buffers });
    this.steps = state.steps;
  }
}

const CRITIC_STATE = 'critic_state.json';

/** The team's critic models: one per agent (IAC) or one shared (MAAC, built from agent 0's model). */
export class Critics {
  readonly models: CriticModel[];
  /** Shared critic: each node's joint inputs and V_old per joint action. */
  private readonly joint = new WeakMap<TreeNode, { inputs: number[][]; values: number[] }>();

  constructor(
    readonly settings: CriticModelSettings,
    specs: readonly AgentSpec[],
  ) {
    this.models = (settings.shared ? specs.slice(0, 1) : specs).map((s) => new CriticModel(s, settings));
  }

  /** V_old of every completion of the tree (a shared critic: of every joint action), into each group's `values`. */
  attach(root: TreeNode): void {
    for (const node of postOrder(root)) {
      if (!this.settings.shared) {
        node.groups.forEach((g, i) => {
          const inputs = g.completions.map((c) => (this.settings.type === 'v' ? g.promptIds : [...g.promptIds, ...c.ids]));
          // V(h) is one value for the whole group: computed once
          const values = this.settings.type === 'v' ? this.models[i].values(inputs.slice(0, 1)) : this.models[i].values(inputs);
          g.values = g.completions.map((_, k) => values[this.settings.type === 'v' ? 0 : k]);
        });
        continue;
      }
      const critic = this.models[0];
      const prompts = node.groups.map((g) => promptText(g.prompt));
      const texts = node.joint.map((idx) =>
        jointCriticText(prompts, this.settings.type === 'v' ? null : idx.map((g, i) => node.groups[i].completions[g].text)),
      );
      const inputs = texts.map((t) => fitPositions(critic.lm.tokenizer.promptIds(t), critic.lm.model.maxPositions));
      const values = this.settings.type === 'v' ? new Array<number>(texts.length).fill(critic.values(inputs.slice(0, 1))[0]) : critic.values(inputs);
      this.joint.set(node, { inputs, values });
      node.groups.forEach((g, i) => {
        g.values = g.completions.map((_, c) => values[node.joint.findIndex((idx) => idx[i] === c)]);
      });
    }
  }

  /** The node as the algorithm reads it: with its joint critic terms when the critic is shared. */
  node(node: TreeNode): ScoredNode {
    const joint = this.joint.get(node);
    return joint ? { ...node, jointCritic: joint } : node;
  }

  /**
   * One critic step per minibatch the actors took: agent i's critic on agent i's (IAC), the
   * shared critic on the lowest drained agent's, whose samples hold every joint action once
   * (MAAC: every agent buffers one sample per joint action, so all drain together). Returns per
   * agent (IAC) or for the shared critic (key -1) the mean value loss and gradient norm.
   */
  async train(drained: readonly { agent: number; minibatches: LossSample[][] }[]): Promise<Map<number, { valueLoss: number; gradNorm: number }>> {
    const out = new Map<number, { valueLoss: number; gradNorm: number }>();
    const jobs = this.settings.shared
      ? drained.slice(0, 1).map((d) => ({ ...d, model: this.models[0], key: -1 }))
      : drained.map((d) => ({ ...d, model: this.models[d.agent], key: d.agent }));
    for (const { minibatches, model, key } of jobs) {
      if (minibatches.length === 0) continue;
      let valueLoss = 0;
      let norm = 0;
      for (const mb of minibatches) {
        const r = await model.step(mb.flatMap((s) => examples(s, this.settings.type)));
        valueLoss += r.valueLoss;
        norm += r.gradNorm;
      }
      await model.sync();
      out.set(key, { valueLoss: valueLoss / minibatches.length, gradNorm: norm / minibatches.length });
    }
    return out;
  }

  /** The agents as checkpoints and final models save them: each with its critic (`critic/` beside `agent_<i>/` when shared). */
  withCritics(agents: readonly AgentHandle[]): AgentHandle[] {
    const place = (a: AgentHandle, dir: string): { model: CriticModel; dir: string } | null =>
      this.settings.shared
        ? a.index === 0
          ? { model: this.models[0], dir: join(dirname(dir), 'critic') }
          : null
        : { model: this.models[a.index], dir: join(dir, 'critic') };
    return agents.map((a) =>
      Object.assign(Object.create(a) as AgentHandle, {
        save: async (dir: string) => {
          await a.save(dir);
          const p = place(a, dir);
          await p?.model.save(p.dir);
        },
        load: async (dir: string) => {
          await a.load(dir);
          const p = place(a, dir);
          await p?.model.load(p.dir);
        },
      }),
    );
  }
}

/** A sample's critic examples, one per completion: its critic input (the joint one, or the agent's prompt, + completion for Q). */
function examples(s: LossSample, type: 'v' | 'q'): CriticExample[] {
  const c = s.critic;
  if (!c) throw new Error('critic: a sample without its critic terms');
  return s.completions.map((ids, g) => ({
    input: c.inputs?.[g] ?? (type === 'v' ? s.promptIds : [...s.promptIds, ...ids]),
    target: c.targets[g],
    oldValue: c.oldValues[g],
  }));
}

/** Ids that fit the critic's positions: the first (BOS) and the last ones, as left truncation keeps them. */
function fitPositions(ids: number[], max: number): number[] {
  return ids.length <= max ? ids : [ids[0], ...ids.slice(ids.length - max + 1)];
}

/** The critic models `settings` asks for (null: none), one per agent spec or one shared. */
export function createCritics(settings: CriticModelSettings | null, specs: readonly AgentSpec[]): Critics | null {
  return settings ? new Critics(settings, specs) : null;
}
