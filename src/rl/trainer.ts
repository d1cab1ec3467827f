/**
 * The trainer: one loop for every algorithm of rl/algorithms/ (`trainer.algorithm`; MAGRPO,
 * arXiv 2508.04652, by default; CoMLRL `MAGRPOTrainer.train`, comlrl/trainers/reinforce/magrpo.py).
 * Online (the MAGRPO family), per training item (docs/algorithms.md "The rollout tree, returns and
 * buffers"; the samples' returns, KL shaping and advantages: "The update, equation by equation"):
 *
 *   tree    = buildTree(item)                      rollout.ts (in train(), the items up to the
 *                                                  next drain are sampled in one batch: sampleWindow)
 *   R       = computeReturns(tree, γ)              rollout.ts
 *   samples = nodeSamples(tree)                    per agent i, node n: the algorithm's samples
 *   for each env step s (ascending): buffers += samples at s; drain full buffers
 *   drain(i) = for turn group, shuffled minibatch: agent i takes one optimizer step on
 *              the algorithm's loss, e.g. −mean_g A_g · log π_i(c_g | p)
 *
 * Offline (MADPO): every item's samples first, then epochs of minibatch steps (trainOffline).
 * docs/algorithms.md lists the algorithms; N = 1 is GRPO; PPO clipping, reference KL, LoRA by config.
 */
import { join, relative } from 'node:path';
import { Rng, type RngState } from '../engine/rng.js';
import { resolvePrecision, setPrecision } from '../engine/runtime.js';
import { agentReturns, jointActionsPerNode, mean, treeNodeTurns } from './advantage.js';
import type { AgentSpec, LossSample, UpdateStats } from './agent.js';
import { type AgentHandle, createAgents, forEachAgent } from './agent-pool.js';
import type { Algorithm } from './algorithms/algorithm.js';
import { algorithmNamed } from './algorithms/index.js';
import { fire, type TrainerCallback } from './callbacks.js';
import { CHECKPOINT_VERSION, loadCheckpoint, resolveCheckpoint, rollbackLogs, saveCheckpoint, type TrainerState } from './checkpoint.js';
import { type MagrpoConfig, type MagrpoConfigInput, perAgent, resolveConfig } from './config.js';
import { type Critics, createCritics } from './critics.js';
import { evaluate } from './evaluate.js';
import { FluencyMonitor, type GroupFluency, groupFluency, meanFluency } from './fluency-monitor.js';
import { CsvSink, JsonlSink, MetricsLogger, type MetricsSink } from './metrics.js';
import { RewardModel, rewardModelTask } from './reward-model.js';
import { buildTrees, computeReturns, lastEnvStep, postOrder, type RolloutContext, type TreeNode } from './rollout.js';
import { rolloutSpec } from './sampler.js';
import { windowSize } from './sampling-window.js';
import { type EvalEpisode, formattersFor, type Task, TaskError } from './task.js';
import { TensorBoardSink } from './tensorboard.js';
import { type LearnerProcess, startLearner, type TorchLearnerSpec } from './torch-learner.js';

/** One agent's training sample from one tree node (CoMLRL's "NodeSample"). */
export interface NodeSample {
  agent: number;
  turn: number;
  envStep: number;
  meanReward: number;
  meanReturn: number;
  /** Mean k3 KL of the node's completions vs the reference (null without a reference). */
  refKl: number | null;
  components: Record<string, number>;
  /** The node's G returns for this agent were all equal: zero advantage, no policy-gradient signal. */
  uniform: boolean;
  /** Fluency of this agent's completions at the node (empty with fluency_metrics off). */
  fluency: GroupFluency;
  loss: LossSample;
}

export interface TrainerOptions<Item> {
  task: Task<Item>;
  config?: MagrpoConfigInput;
  /** Homogeneous team: every agent starts from this model folder. */
  model?: string;
  /** Heterogeneous team: one model folder per agent. */
  models?: readonly string[];
  /** Extra metric sinks (with output_dir set, `report_to` adds metrics.jsonl, TensorBoard and CSV writers). */
  sinks?: MetricsSink[];
  /** Hooks called at each stage of training (TRL's TrainerCallback idea): rl/callbacks.ts. */
  callbacks?: TrainerCallback<Item>[];
  /** Called after every training item. */
  onItem?: (p: { epoch: number; index: number; items: number; totalItems: number; envStep: number }) => void;
  /** Called with each item's scored rollout tree (prompts, completions, rewards), e.g. to record samples. */
  onTree?: (p: { itemIndex: number; envStep: number; root: TreeNode }) => void;
  /** Called once per agent when its fluency degrades (default: printed to stderr). */
  onWarning?: (message: string) => void;
  /** Called with every evaluation's metrics and episodes. */
  onEval?: (p: { envStep: number; metrics: Record<string, number>; episodes: EvalEpisode<Item>[] }) => void;
}

export interface TrainOptions {
  /** Continue from a checkpoint folder (or a run folder: its checkpoints/latest). */
  resumeFrom?: string;
  /** Stop after this many training items in total (a checkpoint is written if output_dir is set). */
  maxItems?: number;
}

export class MAGRPOTrainer<Item> {
  readonly config: MagrpoConfig;
  /** What the team is trained with (`trainer.algorithm`; rl/algorithms/). */
  readonly algorithm: Algorithm;
  readonly task: Task<Item>;
  readonly agents: AgentHandle[];
  /** Critic models apart from the actors (IAC's separate critics, MAAC's shared one; rl/critics.ts), null without. */
  readonly critics: Critics | null;
  readonly logger: MetricsLogger;
  envStep = 0;
  items = 0;
  protected epoch = 0;
  protected index = 0;
  protected readonly rng: Rng;
  protected buffers: NodeSample[][];
  protected readonly ctx: RolloutContext<Item>;
  /** What training rollouts read: ctx, rewarded by trainer.reward_model when set (evaluation keeps the task's reward). */
  protected rolloutCtx: RolloutContext<Item>;
  private readonly timing = { sampling: 0, reward: 0, update: 0, items: 0 };
  protected stopRequested = false;
  private readonly fluency: FluencyMonitor;
  /** The PyTorch learner this trainer started (learner.backend torch without a url), stopped by close(). */
  private readonly learnerProcess: LearnerProcess | null;
  private readonly learnerSpec: TorchLearnerSpec | undefined;
  protected readonly callbacks: TrainerCallback<Item>[];
  /** Entries logged since the callbacks last saw them (sinks are synchronous, callbacks async). */
  private pendingLogs: { envStep: number; metrics: Record<string, number> }[] = [];
  /** Samples left out of the buffers by drop_uniform_groups, logged with the next drain. */
  private unbuffered: NodeSample[] = [];
  /** uniform_item_skip_epochs: item index → the epoch in which its tree was last uniform. */
  private uniformItems = new Map<number, number>();
  /** Items skipped by uniform_item_skip_epochs since the last log entry. */
  private skipped = 0;
  /** Offline training: the trainer RNG as the current pass over the samples began (null between passes). */
  private passRng: RngState | null = null;
  /** Trees of the current sampling window not trained on yet: item index (this epoch) → scored tree. */
  private ahead = new Map<number, TreeNode>();

  constructor(protected readonly opts: TrainerOptions<Item>) {
    this.callbacks = opts.callbacks ?? [];
    const models = resolveModels(opts);
    const explicitN = (opts.config as { num_agents?: number } | undefined)?.num_agents;
    if (explicitN !== undefined && explicitN !== models.length) {
      throw new TaskError('models', `num_agents is ${explicitN} but ${models.length} model folder(s) were given`);
    }
    this.config = resolveConfig({ ...opts.config, num_agents: models.length });
    const c = this.config;
    this.algorithm = algorithmNamed(c.algorithm);
    this.task = this.algorithm.team?.(opts.task, c).task ?? opts.task;
    setPrecision(resolvePrecision(c.precision)); // process-wide: sampling, log-probs and updates all see the same products
    if (c.num_turns > 1 && !opts.task.transition)
      throw new TaskError('transition', `num_turns = ${c.num_turns}: multi-turn MAGRPO needs an external transition`);
    if (opts.task.dataset.length === 0) throw new TaskError('dataset', 'the training dataset is empty');
    const rewardModel = c.reward_model === null ? null : RewardModel.load(c.reward_model);
    this.rng = new Rng(c.seed);
    this.buffers = models.map(() => []);
    this.fluency = new FluencyMonitor(models.length);
    ({ process: this.learnerProcess, spec: this.learnerSpec } = startLearner(c.learner));
    try {
      const specs = models.map((dir, i) => this.agentSpec(dir, i));
      this.agents = createAgents(specs, c.parallel_training === 'mp' ? 'mp' : 'none');
      this.critics = createCritics(this.algorithm.criticModel?.(c) ?? null, specs);
    } catch (e) {
      void this.learnerProcess?.close();
      throw e;
    }
    const sinks = [...(opts.sinks ?? []), ...reportSinks(c)];
    // Callbacks see every entry the sinks see (the logger decides what is written).
    sinks.push({ log: (envStep, metrics) => this.pendingLogs.push({ envStep, metrics }) });
    this.logger = new MetricsLogger(sinks, c.logging_steps);
    this.ctx = { task: this.task, config: c, agents: this.agents, formatters: formattersFor(this.task, models.length), itemIndex: 0 };
    this.rolloutCtx = rewardModel ? { ...this.ctx, task: rewardModelTask(this.task, rewardModel, models.length) } : this.ctx;
  }

  /** Training items the run rolls out: every item each epoch (online), or each item once (offline). */
  get totalItems(): number {
    return this.task.dataset.length * (this.algorithm.schedule === 'offline' ? 1 : this.config.num_train_epochs);
  }

  private agentSpec(modelDir: string, index: number): AgentSpec {
    const c = this.config;
    return {
      index,
      algorithm: c.algorithm,
      modelDir,
      seed: (c.seed * 1000003 + index * 7919 + 1) >>> 0,
      lr: perAgent(c.agent_learning_rate, index),
      weightDecay: c.weight_decay,
      betas: c.adam_betas,
      eps: c.adam_eps,
      maxGradNorm: c.max_grad_norm,
      lrScheduler: c.lr_scheduler,
      warmupSteps: c.warmup_steps,
      totalSteps: this.estimatedOptimizerSteps(),
      lora: c.lora,
      lossAggregation: c.loss_aggregation,
      maxNewTokens: c.max_new_tokens,
      ppoClipEps: c.ppo_clip_eps,
      referenceKl: c.reference_kl_enabled ? { mode: c.reference_kl_mode, coef: perAgent(c.reference_kl_coef, index) } : null,
      critic: this.algorithm.critic?.(c) ?? null,
      trackReference: c.fluency_metrics,
      rollout: rolloutSpec(c),
      learner: this.learnerSpec,
    };
  }

  /**
   * Optimizer steps per agent over the run, for LR schedules: the buffer schedule replayed on
   * counts (no early termination; a terminated node only shortens the run). Each drain takes, per
   * turn group, ceil(group / train_batch_size) steps per ppo_epoch, as drain() does.
   */
  private estimatedOptimizerSteps(): number {
    const c = this.config;
    if (this.algorithm.schedule === 'offline') {
      const pairs = this.task.dataset.length * (this.algorithm.samplesPerItem?.(c) ?? 1);
      return Math.max(1, Math.ceil(pairs / (c.train_batch_size ?? c.rollout_buffer_size)) * c.num_train_epochs);
    }
    const K = jointActionsPerNode(c.joint_mode, c.num_agents, c.num_generations);
    const mb = c.train_batch_size ?? c.rollout_buffer_size;
    const perNode = this.algorithm.samplesPerNode?.(c) ?? 1;
    const order = treeNodeTurns(K, c.num_turns);
    const perTurn = new Array<number>(c.num_turns).fill(0);
    let held = 0;
    let steps = 0;
    const drain = () => {
      for (let t = 0; t < perTurn.length; t++) steps += Math.ceil(perTurn[t] / mb) * c.ppo_epochs;
      perTurn.fill(0);
      held = 0;
    };
    // Every epoch starts with empty buffers (the previous one ends with a drain), so epochs are alike.
    for (let item = 0; item < this.task.dataset.length; item++) {
      for (const t of order) {
        perTurn[t] += perNode;
        held += perNode;
        if (held >= c.rollout_buffer_size) drain();
      }
    }
    if (held > 0) drain();
    return Math.max(1, steps * c.num_train_epochs);
  }

  /** The training loop (CoMLRL `train`): epochs × items, evaluation, drains, checkpoints. */
  async train(o: TrainOptions = {}): Promise<{ envStep: number; items: number; eval: Record<string, number> }> {
    if (this.config.iterative !== null) throw new Error('trainer.iterative is set: train with MADPOIterTrainer / MARLHFIterTrainer (createTrainer picks)');
    if (o.resumeFrom) await this.restore(o.resumeFrom);
    if (this.algorithm.schedule === 'offline') return this.trainOffline(o);
    const c = this.config;
    const data = this.task.dataset;
    let lastEval: Record<string, number> = {};
    if (this.items === 0) this.logger.hparams(c, ['turn_1/reward_mean', 'eval/turn_1/reward_mean']);
    await fire(this.callbacks, 'onTrainBegin', { config: c, items: this.items, envStep: this.envStep });
    for (; this.epoch < c.num_train_epochs; this.epoch++, this.index = 0) {
      for (; this.index < data.length; this.index++) {
        if (this.stopRequested || (o.maxItems !== undefined && this.items >= o.maxItems)) return this.stopEarly(lastEval);
        if (c.eval_interval > 0 && this.index % c.eval_interval === 0 && this.task.evalDataset?.length) lastEval = await this.evaluate();
        if (this.sitsOut(this.index)) this.skipped++;
        else {
          if (!this.ahead.has(this.index)) await this.sampleWindow(this.index);
          await this.trainStep(data[this.index], this.index);
        }
        // Skipped items count too: `items` is the position in the schedule (progress, save_steps, maxItems).
        this.items++;
        // Model work is synchronous: let signals (Ctrl-C) and the dashboard's requests through.
        await new Promise((resolve) => setImmediate(resolve));
        const progress = { epoch: this.epoch, index: this.index, items: this.items, totalItems: this.totalItems, envStep: this.envStep };
        this.opts.onItem?.(progress);
        await this.flushLogs();
        await fire(this.callbacks, 'onStepEnd', progress);
        if (c.output_dir && c.save_steps > 0 && this.items % c.save_steps === 0) await this.checkpoint({ epoch: this.epoch, index: this.index + 1 });
      }
      await this.drain(this.buffers.flatMap((b, i) => (b.length ? [i] : [])));
      if (this.unbuffered.length) this.logDrain([], []); // rewards of dropped groups, not yet logged
    }
    return this.finish(lastEval, { epoch: this.epoch, index: 0 });
  }

  /** The end of a run: a last evaluation, the final checkpoint (at `pos`) and models, onTrainEnd. */
  protected async finish(lastEval: Record<string, number>, pos: { epoch: number; index: number }) {
    const c = this.config;
    if (this.task.evalDataset?.length && c.eval_interval > 0) lastEval = await this.evaluate();
    if (c.output_dir) {
      await this.checkpoint(pos);
      await this.saveModels(join(c.output_dir, 'final'));
    }
    await this.flushLogs();
    const result = { envStep: this.envStep, items: this.items, eval: lastEval };
    await fire(this.callbacks, 'onTrainEnd', { ...result, stoppedEarly: false });
    return result;
  }

  /**
   * Offline algorithms (MADPO): every training item's tree first (`index` = the next item), its
   * samples kept in the buffers, one list per agent with the same items in the same order; then
   * num_train_epochs shuffled passes over them (`epoch` = the pass, `index` = items + minibatches
   * taken in it), one optimizer step per agent per minibatch, evaluation every eval_interval
   * steps. Checkpoints follow save_steps while items are rolled out, then the last item and every
   * pass; a stop request is honoured between items and between steps, and a resume is exact.
   */
  private async trainOffline(o: TrainOptions) {
    const c = this.config;
    const data = this.task.dataset;
    let lastEval: Record<string, number> = {};
    if (this.items === 0) this.logger.hparams(c, ['turn_1/reward_mean', 'eval/turn_1/reward_mean']);
    await fire(this.callbacks, 'onTrainBegin', { config: c, items: this.items, envStep: this.envStep });
    const rollingOut = this.index < data.length;
    for (; this.index < data.length; this.index++) {
      if (this.stopRequested || (o.maxItems !== undefined && this.items >= o.maxItems)) return this.stopEarly(lastEval);
      const samples = this.nodeSamples(await this.scoredTree(data[this.index], this.index));
      for (const s of samples) this.buffers[s.agent].push(s);
      this.logDrain(samples, []);
      this.items++;
      await new Promise((resolve) => setImmediate(resolve));
      const progress = { epoch: 0, index: this.index, items: this.items, totalItems: this.totalItems, envStep: this.envStep };
      this.opts.onItem?.(progress);
      await this.flushLogs();
      await fire(this.callbacks, 'onStepEnd', progress);
      if (c.output_dir && c.save_steps > 0 && this.items % c.save_steps === 0 && this.index + 1 < data.length)
        await this.checkpoint({ epoch: 0, index: this.index + 1 });
    }
    const n = this.buffers[0].length;
    if (n === 0)
      (this.opts.onWarning ?? ((m: string) => process.stderr.write(`[magrpo] warning: ${m}\n`)))(
        `${c.algorithm}: no training samples (every item's candidates tied)`,
      );
    if (rollingOut && c.output_dir) await this.checkpoint({ epoch: this.epoch, index: data.length });
    const mb = c.train_batch_size ?? c.rollout_buffer_size;
    for (; this.epoch < c.num_train_epochs && n > 0; this.epoch++) {
      // A checkpoint inside the pass keeps the RNG as the pass began, so a resume draws the same
      // order and skips the minibatches already taken (index − items of the dataset).
      this.passRng = this.rng.getState();
      const order = this.rng.shuffle(Array.from({ length: n }, (_, k) => k));
      for (let k = (this.index - data.length) * mb; k < n; k += mb) {
        if (this.stopRequested) return this.stopEarly(lastEval);
        const step = this.epoch * Math.ceil(n / mb) + k / mb;
        if (c.eval_interval > 0 && step % c.eval_interval === 0 && this.task.evalDataset?.length) lastEval = await this.evaluate();
        await this.offlineStep(order.slice(k, k + mb));
        this.index = data.length + k / mb + 1;
        await this.flushLogs();
      }
      this.passRng = null;
      this.index = data.length;
      if (c.output_dir && this.epoch + 1 < c.num_train_epochs) await this.checkpoint({ epoch: this.epoch + 1, index: data.length });
    }
    return this.finish(lastEval, { epoch: this.epoch, index: data.length });
  }

  /**
   * One optimizer step of every agent on the buffered samples `picked` (offline): the algorithm's
   * teamBatch sees the team's current log-probs first. Each sample's completions count as that
   * many env steps (a preference pair: its two joint actions, as CoMLRL's environment_steps_per_pair).
   */
  protected async offlineStep(picked: number[]): Promise<void> {
    const batch = this.agents.map((a) => picked.map((j) => this.buffers[a.index][j].loss));
    let samples = batch;
    let metrics: Record<string, number> = {};
    if (this.algorithm.teamBatch) {
      const logprobs = await forEachAgent(this.agents, (a) => a.sequenceLogprobs(batch[a.index]));
      ({ samples, metrics } = this.algorithm.teamBatch(batch, logprobs));
    }
    const t0 = performance.now();
    const stats = await forEachAgent(this.agents, (a) => a.update([samples[a.index]]));
    this.timing.update += performance.now() - t0;
    this.envStep += batch[0].reduce((acc, s) => acc + s.completions.length, 0);
    this.logDrain(
      picked.flatMap((j) => this.buffers.map((b) => b[j])),
      stats.map((st, i) => [i, st] as const),
      { step: this.envStep, metrics },
    );
  }

  /** Hands entries logged since the last call to the callbacks' onLog, in order. */
  protected async flushLogs(): Promise<void> {
    const logs = this.pendingLogs;
    this.pendingLogs = [];
    for (const l of logs) await fire(this.callbacks, 'onLog', l);
  }

  /** Asks `train()` to stop after the current item, writing a checkpoint (e.g. on Ctrl-C). */
  requestStop(): void {
    this.stopRequested = true;
  }

  protected async stopEarly(lastEval: Record<string, number>) {
    if (this.config.output_dir) await this.checkpoint({ epoch: this.epoch, index: this.index });
    await this.flushLogs();
    const result = { envStep: this.envStep, items: this.items, eval: lastEval };
    await fire(this.callbacks, 'onTrainEnd', { ...result, stoppedEarly: true });
    return result;
  }

  /** One item: rollout tree → returns → per-agent node samples → buffers (drained when full). */
  async trainStep(item: Item, itemIndex = 0): Promise<TreeNode> {
    const root = await this.scoredTree(item, itemIndex);
    const all = this.nodeSamples(root);
    if (this.config.uniform_item_skip_epochs > 0) {
      if (all.every((s) => s.uniform)) this.uniformItems.set(itemIndex, this.epoch);
      else this.uniformItems.delete(itemIndex);
    }
    const samples = this.config.drop_uniform_groups ? all.filter((s) => !s.uniform) : all;
    if (samples.length < all.length) this.unbuffered.push(...all.filter((s) => s.uniform));
    const steps = [...new Set(samples.map((s) => s.envStep))].sort((a, b) => a - b);
    for (const step of steps) {
      for (const s of samples.filter((x) => x.envStep === step)) this.buffers[s.agent].push(s);
      const ready = this.buffers.flatMap((b, i) => (b.length >= this.config.rollout_buffer_size ? [i] : []));
      if (ready.length) await this.drain(ready);
    }
    return root;
  }

  /**
   * The scored rollout tree of one item, its returns computed; the env step moves past it. The
   * tree comes from the sampling window when one holds it (train()), else it is sampled here.
   */
  private async scoredTree(item: Item, itemIndex: number): Promise<TreeNode> {
    const ahead = this.ahead.get(itemIndex);
    this.ahead.delete(itemIndex);
    const root = ahead ?? (await this.sampleTrees([{ item, itemIndex }]))[0];
    // Critic models do not change while a tree is built: valuing it afterwards gives V_old.
    this.critics?.attach(root);
    computeReturns(root, this.config.discount);
    this.envStep = lastEnvStep(root);
    this.opts.onTree?.({ itemIndex, envStep: this.envStep, root });
    await fire(this.callbacks, 'onTree', { itemIndex, envStep: this.envStep, root });
    return root;
  }

  /** Rollout trees of `entries`, sampled together, env steps numbered on from the current one. */
  private async sampleTrees(entries: readonly { item: Item; itemIndex: number }[]): Promise<TreeNode[]> {
    const times = { sampling: 0, reward: 0 };
    const roots = await buildTrees(this.rolloutCtx, entries, this.envStep, times);
    this.timing.sampling += times.sampling;
    this.timing.reward += times.reward;
    this.timing.items += roots.length;
    return roots;
  }

  /**
   * Samples the trees of item `index` and of the items after it that the same weights sample
   * (rl/sampling-window.ts), in one batch; an item that sits out and the epoch's end close the
   * window, a stop (maxItems, requestStop) does not: which items share a batch, and so every
   * sample, is the same however the run is cut. Each tree is trained on when its item comes
   * (scoredTree); a checkpoint in between keeps the rest (TrainerState.ahead).
   */
  private async sampleWindow(index: number): Promise<void> {
    const data = this.task.dataset;
    const held = Math.max(...this.buffers.map((b) => b.length));
    const size = windowSize(this.config, held, this.algorithm.samplesPerNode?.(this.config) ?? 1);
    const entries: { item: Item; itemIndex: number }[] = [];
    for (let j = index; j < data.length && entries.length < size && (j === index || !this.sitsOut(j)); j++) entries.push({ item: data[j], itemIndex: j });
    const roots = await this.sampleTrees(entries);
    for (const [k, root] of roots.entries()) this.ahead.set(entries[k].itemIndex, root);
  }

  /**
   * uniform_item_skip_epochs: an item whose whole tree was uniform in epoch e sits out epochs
   * e+1 … e+k and is sampled again in epoch e+k+1 (the policy may have moved on).
   */
  private sitsOut(index: number): boolean {
    const k = this.config.uniform_item_skip_epochs;
    const last = this.uniformItems.get(index);
    return k > 0 && last !== undefined && this.epoch > last && this.epoch - last <= k;
  }

  /** Per node and agent: what the algorithm trains on (the MAGRPO family: one sample with advantages; MADPO: its pairs). */
  nodeSamples(root: TreeNode): NodeSample[] {
    const c = this.config;
    const G = c.num_generations;
    const out: NodeSample[] = [];
    for (const node of postOrder(root)) {
      const losses = this.algorithm.samples(this.critics?.node(node) ?? node, c, this.rng);
      for (let i = 0; i < this.agents.length; i++) {
        const group = node.groups[i];
        const R = agentReturns(node.returns, node.joint, i, G, c.cross_credit);
        const componentNames = new Set(node.components.flatMap((x) => Object.keys(x)));
        const fluency = c.fluency_metrics ? groupFluency(group, this.task.outputKind !== 'code') : {};
        const warning = c.fluency_metrics ? this.fluency.observe(i, fluency, group.completions[0]?.text ?? '') : null;
        if (warning) (this.opts.onWarning ?? ((m: string) => process.stderr.write(`[magrpo] warning: ${m}\n`)))(warning);
        const meta = {
          agent: i,
          turn: node.turn,
          envStep: node.envStep,
          meanReward: mean(node.rewards),
          meanReturn: mean(node.returns),
          refKl: group.refKl ? mean(group.refKl) : null,
          components: Object.fromEntries([...componentNames].map((n) => [n, mean(node.components.map((x) => x[n] ?? 0))])),
          // A critic's advantage is r − V, not a comparison within the group: equal returns still teach.
          uniform: !this.algorithm.critic && R.every((r) => Math.abs(r - R[0]) <= 1e-9 * Math.max(1, Math.abs(R[0]))),
          fluency,
        };
        for (const loss of losses[i]) out.push({ ...meta, loss });
      }
    }
    return out;
  }

  /**
   * Drains the buffers of `agentIds` (CoMLRL `_process_buffer` / `_update_from_samples`): per turn group in ascending order, shuffled,
   * minibatches of train_batch_size, one optimizer step each; ppo_epochs passes. Agents update
   * concurrently in `mp` mode. Logs turn and agent metrics at the largest env step drained.
   */
  protected async drain(agentIds: number[]): Promise<void> {
    const c = this.config;
    const mbSize = c.train_batch_size ?? c.rollout_buffer_size;
    const drained = agentIds.map((i) => {
      const samples = this.buffers[i];
      this.buffers[i] = [];
      const minibatches: LossSample[][] = [];
      for (const turn of [...new Set(samples.map((s) => s.turn))].sort((a, b) => a - b)) {
        const losses = samples.filter((s) => s.turn === turn).map((s) => s.loss);
        const prepared = this.algorithm.prepareBatch?.(losses, c) ?? losses;
        for (let e = 0; e < c.ppo_epochs; e++) {
          const group = this.rng.shuffle([...prepared]);
          for (let k = 0; k < group.length; k += mbSize) minibatches.push(group.slice(k, k + mbSize));
        }
      }
      return { agent: i, samples, minibatches };
    });
    const ids = new Set(agentIds);
    // Timed here, before logDrain writes and resets the timers, so an entry includes its own updates.
    const t0 = performance.now();
    const stats = await forEachAgent(
      this.agents.filter((a) => ids.has(a.index)),
      (a) => a.update((drained.find((d) => d.agent === a.index) as (typeof drained)[number]).minibatches),
    );
    const critic = await this.critics?.train(drained);
    this.timing.update += performance.now() - t0;
    const shared = critic?.get(-1);
    this.logDrain(
      drained.flatMap((d) => d.samples),
      drained.map((d, k) => {
        const own = critic?.get(d.agent);
        return [d.agent, own ? { ...stats[k], valueLoss: own.valueLoss, criticGradNorm: own.gradNorm } : stats[k]] as const;
      }),
      shared ? { metrics: { 'critic/value_loss': shared.valueLoss, 'critic/grad_norm': shared.gradNorm } } : {},
    );
  }

  /**
   * Logs the drained samples (plus those drop_uniform_groups kept out of the buffers) and the
   * agents' update stats, at the samples' last env step unless `at.step` says otherwise.
   */
  private logDrain(
    drainedSamples: NodeSample[],
    stats: (readonly [number, UpdateStats & { criticGradNorm?: number }])[],
    at: { step?: number; metrics?: Record<string, number> } = {},
  ): void {
    const samples = [...drainedSamples, ...this.unbuffered];
    this.unbuffered = [];
    if (samples.length === 0) return;
    const m: Record<string, number> = { ...at.metrics };
    for (const turn of [...new Set(samples.map((s) => s.turn))]) {
      const g = samples.filter((s) => s.turn === turn);
      const k = `turn_${turn + 1}`;
      m[`${k}/reward_mean`] = mean(g.map((s) => s.meanReward));
      m[`${k}/expected_return`] = mean(g.map((s) => s.meanReturn));
      // TRL's name: the share of groups whose rewards were all equal (zero advantage, nothing learned).
      m[`${k}/frac_reward_zero_std`] = mean(g.map((s) => (s.uniform ? 1 : 0)));
      for (const name of new Set(g.flatMap((s) => Object.keys(s.components)))) m[`${k}/reward/${name}`] = mean(g.map((s) => s.components[name] ?? 0));
      const withKl = g.filter((s) => s.refKl !== null);
      if (withKl.length) {
        m[`${k}/reference_kl_mean`] = mean(withKl.map((s) => s.refKl as number));
        if (this.config.reference_kl_enabled)
          m[`${k}/reference_kl_penalty_mean`] = mean(withKl.map((s) => perAgent(this.config.reference_kl_coef, s.agent) * (s.refKl as number)));
      }
    }
    for (const i of new Set(samples.map((s) => s.agent))) {
      const fluency = meanFluency(samples.filter((s) => s.agent === i).map((s) => s.fluency ?? {}));
      for (const [name, v] of Object.entries(fluency)) m[`agent_${i}/${name}`] = v;
    }
    for (const [i, s] of stats) {
      m[`agent_${i}/loss`] = s.loss;
      m[`agent_${i}/grad_norm`] = s.gradNorm;
      m[`agent_${i}/entropy`] = s.entropy;
      m[`agent_${i}/completion_length`] = s.completionLength;
      m[`agent_${i}/lr`] = s.lr;
      if (s.valueLoss !== undefined) m[`agent_${i}/value_loss`] = s.valueLoss;
      if (s.criticGradNorm !== undefined) m[`agent_${i}/critic_grad_norm`] = s.criticGradNorm;
      for (const [name, v] of Object.entries(s.rollout ?? {})) m[`agent_${i}/${name}`] = v;
    }
    if (this.config.uniform_item_skip_epochs > 0) {
      m['items/skipped_uniform'] = this.skipped;
      this.skipped = 0;
    }
    const t = this.timing;
    if (t.items > 0) {
      m['time/sampling_s'] = t.sampling / 1000 / t.items;
      m['time/reward_s'] = t.reward / 1000 / t.items;
      m['time/update_s'] = t.update / 1000 / t.items;
    }
    if (this.logger.train(at.step ?? Math.max(...samples.map((s) => s.envStep)), m))
      Object.assign(this.timing, { sampling: 0, reward: 0, update: 0, items: 0 });
  }

  /** Evaluates on the first eval_num_samples eval items and logs at the current env step. */
  async evaluate(): Promise<Record<string, number>> {
    const items = (this.task.evalDataset ?? []).slice(0, this.config.eval_num_samples);
    const { metrics, episodes } = await evaluate(this.ctx, items);
    if (Object.keys(metrics).length) this.logger.always(this.envStep, metrics);
    if (episodes.length) this.logger.text(this.envStep, 'eval/samples', samplesMarkdown(episodes));
    this.opts.onEval?.({ envStep: this.envStep, metrics, episodes });
    await this.flushLogs();
    await fire(this.callbacks, 'onEvaluate', { envStep: this.envStep, metrics, episodes });
    return metrics;
  }

  /** Writes every agent as a HF model folder (or LoRA adapter) under dir/agent_i. */
  async saveModels(dir: string): Promise<void> {
    await forEachAgent(this.withCritics(), (a) => a.save(join(dir, `agent_${a.index}`)));
  }

  protected async checkpoint(pos: { epoch: number; index: number }): Promise<string> {
    const state: Omit<TrainerState<NodeSample>, 'logs'> = {
      version: CHECKPOINT_VERSION,
      epoch: pos.epoch,
      index: pos.index,
      items: this.items,
      envStep: this.envStep,
      rng: this.passRng ?? this.rng.getState(),
      buffers: this.buffers,
      lastLogged: this.logger.lastLogged,
      config: this.config,
      uniformItems: [...this.uniformItems],
      unbuffered: this.unbuffered,
      skipped: this.skipped,
      ...(this.ahead.size ? { ahead: [...this.ahead] } : {}),
      ...this.extraState(),
    };
    const dir = await saveCheckpoint(this.config.output_dir as string, state, this.withCritics(), this.config.save_total_limit);
    await fire(this.callbacks, 'onSave', { dir, items: this.items, envStep: this.envStep });
    return dir;
  }

  protected async restore(path: string): Promise<void> {
    const s = await loadCheckpoint<NodeSample>(path, this.withCritics());
    if (s.config.num_agents !== this.config.num_agents || s.config.num_generations !== this.config.num_generations) {
      throw new Error(
        `${path}: checkpoint was made with num_agents ${s.config.num_agents} / num_generations ${s.config.num_generations}, this run has ${this.config.num_agents} / ${this.config.num_generations}`,
      );
    }
    Object.assign(this, { epoch: s.epoch, index: s.index, items: s.items, envStep: s.envStep, buffers: s.buffers });
    this.uniformItems = new Map(s.uniformItems);
    this.unbuffered = s.unbuffered;
    this.skipped = s.skipped;
    this.ahead = new Map(s.ahead ?? []);
    this.restoreExtra(s);
    this.rng.setState(s.rng);
    this.logger.lastLogged = s.lastLogged;
    // Resuming this run's own checkpoint: entries logged after it are replayed, so cut them.
    const out = this.config.output_dir;
    if (out && !relative(join(out, 'checkpoints'), resolveCheckpoint(path)).startsWith('..')) rollbackLogs(out, s.logs);
  }

  /** What a schedule built on this one adds to its checkpoints (iterative runs: rl/iterative.ts), and reads back. */
  protected extraState(): Pick<TrainerState<NodeSample>, 'iterative'> {
    return {};
  }
  protected restoreExtra(_s: TrainerState<NodeSample>): void {}

  /** The agents as saved and loaded: each with its critic model, if the algorithm has them. */
  private withCritics(): AgentHandle[] {
    return this.critics?.withCritics(this.agents) ?? this.agents;
  }

  async close(): Promise<void> {
    await Promise.all(this.agents.map((a) => a.close()));
    await this.learnerProcess?.close();
    await this.logger.close();
  }
}

/** The metric writers `report_to` asks for, in output_dir (none without one). */
function reportSinks(c: MagrpoConfig): MetricsSink[] {
  const dir = c.output_dir;
  if (!dir) return [];
  return c.report_to.map((target) => {
    if (target === 'jsonl') return new JsonlSink(join(dir, 'metrics.jsonl'));
    if (target === 'tensorboard') return new TensorBoardSink(dir);
    return new CsvSink(join(dir, 'metrics.csv'), join(dir, 'metrics.jsonl'));
  });
}

/** The first few eval episodes as Markdown (TensorBoard's Text tab renders it). */
function samplesMarkdown(episodes: readonly EvalEpisode<unknown>[], max = 4): string {
  const fence = (s: string) => ['```', s.replace(/```/g, '` ` `'), '```'].join('\n');
  const fmt = (r: number) => (Number.isFinite(r) ? r.toFixed(3) : String(r));
  return episodes
    .slice(0, max)
    .map((e) =>
      [
        `**eval item ${e.index}, sample ${e.sample}**`,
        ...e.turns.flatMap((t, ti) => [`turn ${ti + 1}: reward ${fmt(t.reward)}`, ...t.completions.map((c, i) => `agent ${i}:\n\n${fence(c)}`)]),
      ].join('\n\n'),
    )
    .join('\n\n---\n\n');
}

function resolveModels(o: { model?: string; models?: readonly string[]; config?: MagrpoConfigInput }): string[] {
  if (o.models && o.models.length > 0) {
    if (o.model !== undefined && o.models.some((m) => m !== o.model)) {
      throw new TaskError('models', `conflict: model "${o.model}" and models ${JSON.stringify(o.models)} disagree; give one of them`);
    }
    return [...o.models];
  }
  if (o.model !== undefined) return new Array<string>((o.config as { num_agents?: number } | undefined)?.num_agents ?? 2).fill(o.model);
  throw new TaskError('model', 'either model (one folder for every agent) or models (one per agent) must be provided');
}
