/**
 * Iterative MADPO and iterative MARLHF (CoMLRL MADPOIterTrainer / MARLHFIterTrainer,
 * comlrl/trainers/preference/iterative.py; iterative DPO as in Xu et al., *Some things are more
 * CRINGE than others*, arXiv 2312.16682, and Yuan et al., *Self-Rewarding Language Models*, arXiv
 * 2401.10020). `trainer.iterative` set; per iteration t = 0 … T−1:
 *
 *   1. every training item: each agent of the team samples C candidates of its prompt, the
 *      comparator (comparator_policy) C′; aligned joint actions get the joint reward (iterative
 *      MARLHF with preference_scoring_reward reward_model: iteration t−1's reward model).
 *   2. candidate k of the team meets candidate k of the comparator; the better wins
 *      (selectComparisonPairs): iteration t's pair set, kept for replay.
 *   3. the pairs trained on are drawn from sets 0 … t (replayPairs).
 *   4. MADPO: num_train_epochs shuffled passes of the team's DPO loss (algorithms/madpo.ts) over
 *      them, with π_ref = the team as iteration t starts: Δ_ref of every pair, replayed ones too,
 *      is scored by the agents before the first step. MARLHF: a fresh joint reward model
 *      (rl/reward-model.ts) trained on them, then num_train_epochs passes of the online algorithm
 *      over the dataset on its reward.
 *   5. drift: fixed probe completions (iteration 0's candidates of the first drift_probe_items
 *      items) re-scored; per agent the mean per-token log-ratio vs the previous iteration and vs
 *      the starting team (meanLogRatio).
 *   6. checkpoint: agents, trainer RNG, every iteration's pairs, the probe; a resume starts t + 1.
 *
 * Comparator completions become each agent's token ids: those sampled by the team's own weights
 * (current, current_copy, history) keep their ids; text from elsewhere (model, api) is encoded with
 * the agent's tokenizer, without special tokens, as the reference encodes every completion.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Rng } from '../engine/rng.js';
import { LanguageModel } from '../model/pretrained.js';
import { TextTokenizer } from '../model/tokenizer.js';
import type { LossSample } from './agent.js';
import { type AgentHandle, forEachAgent } from './agent-pool.js';
import { splitRoles, TAGGED_ADAPTER } from './algorithms/centralized.js';
import { fire } from './callbacks.js';
import type { TrainerState } from './checkpoint.js';
import {
  apiCompletions,
  type ComparatorApi,
  type DriftProbe,
  type IterativeOptions,
  type IterativeState,
  meanLogRatio,
  type PairRecord,
  replayPairs,
  selectComparisonPairs,
} from './iterative-preference.js';
import { RewardModel, rewardModelTask, trainRewardModel } from './reward-model.js';
import { computeReward, formatPrompt, samplingParams } from './rollout.js';
import { type CentralAdapter, type Prompt, promptText } from './task.js';
import { MAGRPOTrainer, type NodeSample, type TrainerOptions, type TrainOptions } from './trainer.js';

export interface IterativeTrainOptions extends TrainOptions {
  /** Stop after this many iterations in total (a checkpoint is written if output_dir is set). */
  maxIterations?: number;
}

/** One side's candidates of one item: per agent, C completions (ids in the agent's vocabulary, text). */
type Candidates = { ids: number[]; text: string }[][];

const label = (t: number) => `iteration_${String(t).padStart(4, '0')}`;

export class IterativePreferenceTrainer<Item> extends MAGRPOTrainer<Item> {
  private state: IterativeState = { iteration: 0, store: [], probe: null };
  private readonly it: IterativeOptions;
  private readonly modelDirs: string[];
  private readonly tokenizers: TextTokenizer[];
  /** Where history snapshots go: output_dir/policy_checkpoints, or a temporary folder removed by close(). */
  private snapshotRoot: string | null = null;
  private tempSnapshots = false;
  /** Iterative MARLHF scoring by reward model: the last iteration's. */
  private scoringModel: RewardModel | null = null;

  constructor(o: TrainerOptions<Item>) {
    super(o);
    if (this.config.iterative === null) throw new Error('IterativePreferenceTrainer needs trainer.iterative ({} for the reference defaults)');
    this.it = this.config.iterative;
    this.modelDirs = o.models?.length ? [...o.models] : this.agents.map(() => o.model as string);
    this.tokenizers = this.modelDirs.map((d) => TextTokenizer.fromDir(d));
  }

  protected override extraState(): Pick<TrainerState<NodeSample>, 'iterative'> {
    return { iterative: this.state };
  }

  protected override restoreExtra(s: TrainerState<NodeSample>): void {
    if (!s.iterative) throw new Error('the checkpoint is not of an iterative run (no iterative state); resume it with MAGRPOTrainer');
    this.state = s.iterative;
  }

  override async train(o: IterativeTrainOptions = {}): Promise<{ envStep: number; items: number; eval: Record<string, number> }> {
    if (o.resumeFrom) await this.restore(o.resumeFrom);
    const c = this.config;
    const it = this.it;
    let lastEval: Record<string, number> = {};
    if (this.state.iteration === 0) this.logger.hparams(c, ['turn_1/reward_mean', 'eval/turn_1/reward_mean']);
    await fire(this.callbacks, 'onTrainBegin', { config: c, items: this.items, envStep: this.envStep });
    if (it.comparator_policy === 'history' && this.state.iteration === 0) await this.snapshot('initial');
    if (it.preference_scoring_reward === 'reward_model' && this.state.iteration > 0 && c.output_dir)
      this.scoringModel = RewardModel.load(join(c.output_dir, 'reward_models', label(this.state.iteration - 1)));
    while (this.state.iteration < it.num_iterations) {
      if (this.stopRequested || (o.maxIterations !== undefined && this.state.iteration >= o.maxIterations)) return this.stopEarly(lastEval);
      const t = this.state.iteration;
      const current = await this.collect(t);
      this.state.store.push(current);
      const train = replayPairs(this.state.store, it, this.rng);
      this.logger.always(this.envStep, {
        'iter/current_iteration': t + 1,
        'iter/current_preference_pairs': current.length,
        'iter/total_preference_pairs': this.state.store.reduce((a, s) => a + s.length, 0),
        'iter/train_preference_pairs': train.length,
      });
      if (train.length > 0) await (c.algorithm === 'madpo' ? this.dpo(train) : this.rlhf(train, t));
      await this.logDrift();
      if (it.comparator_policy === 'history') await this.snapshot(label(t));
      if (this.task.evalDataset?.length && c.eval_interval > 0) lastEval = await this.evaluate();
      this.state.iteration++;
      await this.flushLogs();
      if (c.output_dir && this.state.iteration < it.num_iterations) await this.checkpoint({ epoch: 0, index: 0 });
    }
    return this.finish(lastEval, { epoch: 0, index: 0 });
  }

  /** Step 1–2 of the module header for every training item: iteration t's pairs. */
  private async collect(t: number): Promise<PairRecord[]> {
    const c = this.config;
    const it = this.it;
    const C = it.preference_num_candidates;
    const C2 = it.comparator_num_candidates ?? C;
    const comparator = this.comparatorModels(t);
    // Comparator sampling of local models draws from its own stream per iteration, so a resumed run draws the same.
    const cmpRng = new Rng((c.seed * 1000003 + 0x5eed + t * 7919) >>> 0);
    const rewardCtx = this.scoringModel ? { ...this.ctx, task: rewardModelTask(this.task, this.scoringModel, this.agents.length) } : this.ctx;
    const pairs: PairRecord[] = [];
    const probe: DriftProbe['samples'] = this.agents.map(() => []);
    for (const [index, item] of this.task.dataset.entries()) {
      const ctx = { ...rewardCtx, itemIndex: index };
      const prompts = this.agents.map((a) => formatPrompt(ctx, a.index, item, null));
      const texts = prompts.map(promptText);
      const team = await forEachAgent(this.agents, async (a) => (await a.sample([{ prompt: prompts[a.index], n: C }], samplingParams(c)))[0]);
      const own: Candidates = team.map((g) => g.completions.map((x) => ({ ids: x.ids, text: x.text })));
      const other =
        it.comparator_generation_mode === 'centralized'
          ? await this.centralizedCandidates(comparator, item, texts, C2, cmpRng)
          : await this.comparatorCandidates(comparator, prompts, C2, cmpRng);
      const rewards = async (side: Candidates) => {
        const out: number[] = [];
        for (let k = 0; k < side[0].length; k++)
          out.push((await computeReward(ctx, { completions: side.map((a) => a[k].text), prompts: texts, item, turn: 0 })).reward);
        return out;
      };
      const rOwn = await rewards(own);
      const rOther = await rewards(other);
      for (const { winner, loser } of selectComparisonPairs(rOwn, rOther, it.pair_selection, it.preference_pairs_per_sample, this.rng)) {
        const side = (s: typeof winner) => (s.source === 'current' ? own : other).map((a) => a[s.index]);
        const reward = (s: typeof winner) => (s.source === 'current' ? rOwn : rOther)[s.index];
        pairs.push({
          item: index,
          iteration: t,
          prompts: texts,
          promptIds: team.map((g) => g.promptIds),
          chosen: side(winner),
          rejected: side(loser),
          rewards: [reward(winner), reward(loser)],
        });
      }
      if (t === 0 && index < it.drift_probe_items)
        for (const [i, g] of team.entries()) probe[i].push({ promptIds: g.promptIds, completions: own[i].map((x) => x.ids) });
      this.envStep += C + C2;
      this.items++;
      this.opts.onItem?.({ epoch: t, index, items: this.items, totalItems: this.totalItems, envStep: this.envStep });
      await new Promise((resolve) => setImmediate(resolve));
    }
    if (t === 0 && it.drift_probe_items > 0) {
      const initial = await this.probeLogprobs(probe);
      this.state.probe = { samples: probe, initial, last: initial };
    }
    return pairs;
  }

  /** The comparator's local models for iteration t (model, history), one per agent; null when the team samples or an API answers. */
  private comparatorModels(t: number): LanguageModel[] | null {
    const it = this.it;
    if (it.comparator_policy === 'model') {
      const dirs = it.comparator_agents ?? this.agents.map(() => it.comparator_model_name as string);
      if (dirs.length !== this.agents.length) throw new Error(`iterative.comparator_agents: ${dirs.length} folders for ${this.agents.length} agents`);
      return dirs.map((d) => LanguageModel.load(d));
    }
    if (it.comparator_policy !== 'history') return null;
    // k iterations back: the team as iteration t − k started, i.e. after iteration t − k − 1 (before the first: as it started).
    const back = t - (it.comparator_history_k ?? 1) - 1;
    const dir = join(this.snapshots(), back < 0 ? 'initial' : label(back));
    // An agent's saved folder (rl/agent.ts save) holds the HF model under model/.
    return this.agents.map((a) => LanguageModel.load(join(dir, `agent_${a.index}`, 'model')));
  }

  /** The API comparator's settings from the config. */
  private comparatorApi(): ComparatorApi {
    const it = this.it;
    return {
      url: it.comparator_api_url as string,
      format: it.comparator_api_format,
      model: it.comparator_api_model,
      maxNPerRequest: it.comparator_api_max_n_per_request,
      timeoutS: it.comparator_api_timeout,
      apiKey: it.comparator_api_key_env ? (process.env[it.comparator_api_key_env] ?? null) : null,
      responseField: it.comparator_api_response_field,
      extraBody: it.comparator_api_extra_body,
    };
  }

  /** The comparator's sampling settings, as the API takes them, and for a local comparator model (with its RNG stream). */
  private comparatorSampling(rng: Rng) {
    const c = this.config;
    const api = { maxNewTokens: c.max_new_tokens, temperature: c.temperature, topP: c.top_p, topK: c.top_k };
    return { api, local: { ...api, stopStrings: c.stop_strings, rng } };
  }

  /** A text as agent i's token ids (text from another model or an API: its ids are not the team's). */
  private encodeFor(i: number, text: string): { ids: number[]; text: string } {
    return { ids: this.tokenizers[i].encode(text, { addSpecialTokens: false }), text };
  }

  private async comparatorCandidates(models: LanguageModel[] | null, prompts: Prompt[], n: number, rng: Rng): Promise<Candidates> {
    const c = this.config;
    const it = this.it;
    const sampling = this.comparatorSampling(rng);
    if (it.comparator_policy === 'api') {
      const out: Candidates = [];
      for (const [i, p] of prompts.entries()) out.push((await apiCompletions(this.comparatorApi(), p, n, sampling.api, i)).map((x) => this.encodeFor(i, x)));
      return out;
    }
    if (models === null) {
      const groups = await forEachAgent(this.agents, async (a) => (await a.sample([{ prompt: prompts[a.index], n }], samplingParams(c)))[0]);
      return groups.map((g) => g.completions.map((x) => ({ ids: x.ids, text: x.text })));
    }
    return models.map((lm, i) =>
      lm
        .sample(
          Array.from({ length: n }, () => prompts[i]),
          sampling.local,
        )
        // History snapshots share the agent's vocabulary: their sampled ids stand; another model's text is encoded.
        .map((s) => (it.comparator_policy === 'history' ? { ids: s.completionIds, text: s.text } : this.encodeFor(i, s.text))),
    );
  }

  /**
   * comparator_generation_mode centralized: the comparator of agent `comparator_centralized_agent_index`
   * (the team's agent for current / current_copy, else its comparator model, snapshot or the API)
   * answers one joint prompt over every agent's prompt n times (the task's centralized adapter, or
   * CoMLRL's <agent_i> tags), and each answer is split into one output per agent, encoded with that
   * agent's tokenizer. An answer without sections gives every agent "" (centralized MAGRPO's rule).
   */
  private async centralizedCandidates(models: LanguageModel[] | null, item: unknown, rolePrompts: string[], n: number, rng: Rng): Promise<Candidates> {
    const c = this.config;
    const it = this.it;
    const who = it.comparator_centralized_agent_index;
    const adapter = (this.task.centralAdapter ?? TAGGED_ADAPTER) as CentralAdapter<unknown>;
    const joint = adapter.buildPrompt(item, rolePrompts);
    const sampling = this.comparatorSampling(rng);
    let answers: string[];
    if (it.comparator_policy === 'api') answers = await apiCompletions(this.comparatorApi(), joint, n, sampling.api, who);
    else if (models === null) answers = (await this.agents[who].sample([{ prompt: joint, n }], samplingParams(c)))[0].completions.map((x) => x.text);
    else
      answers = models[who]
        .sample(
          Array.from({ length: n }, () => joint),
          sampling.local,
        )
        .map((s) => s.text);
    const split = answers.map((a) => splitRoles(adapter, a, item, this.agents.length));
    return this.agents.map((a) => split.map((roles) => this.encodeFor(a.index, roles[a.index])));
  }

  /** Iterative MADPO's step 4: DPO passes over `pairs`, π_ref the team as they begin. */
  private async dpo(pairs: PairRecord[]): Promise<void> {
    const c = this.config;
    const samples: LossSample[][] = this.agents.map((a) =>
      pairs.map((p) => ({
        promptIds: p.promptIds[a.index],
        completions: [p.chosen[a.index].ids, p.rejected[a.index].ids],
        advantages: [],
        oldLogprobs: [[], []],
        preference: { beta: c.dpo_beta, otherDelta: 0, refDelta: 0 },
      })),
    );
    if (!c.reference_free) {
      const lp = await forEachAgent(this.agents, (a) => a.sequenceLogprobs(samples[a.index]));
      pairs.forEach((_, b) => {
        const refDelta = lp.reduce((acc, agent) => acc + agent[b][0] - agent[b][1], 0);
        for (const s of samples) (s[b].preference as NonNullable<LossSample['preference']>).refDelta = refDelta;
      });
    }
    this.buffers = this.agents.map((a: AgentHandle) =>
      samples[a.index].map((loss, b) => {
        const mean = (pairs[b].rewards[0] + pairs[b].rewards[1]) / 2;
        return {
          agent: a.index,
          turn: 0,
          envStep: this.envStep,
          meanReward: mean,
          meanReturn: mean,
          refKl: null,
          components: {},
          uniform: false,
          fluency: {},
          loss,
        };
      }),
    );
    const mb = c.train_batch_size ?? c.rollout_buffer_size;
    for (let e = 0; e < c.num_train_epochs; e++) {
      const order = this.rng.shuffle(pairs.map((_, k) => k));
      for (let k = 0; k < order.length; k += mb) {
        await this.offlineStep(order.slice(k, k + mb));
        await this.flushLogs();
      }
    }
    this.buffers = this.agents.map(() => []);
  }

  /** Iterative MARLHF's step 4: a fresh reward model on `pairs`, then the online algorithm on its reward. */
  private async rlhf(pairs: PairRecord[], t: number): Promise<void> {
    const c = this.config;
    const it = this.it;
    const o = {
      learning_rate: it.reward_learning_rate,
      num_train_epochs: it.reward_num_train_epochs,
      train_batch_size: it.reward_train_batch_size,
      max_length: it.reward_max_length,
      freeze_backbone: it.reward_freeze_backbone,
      seed: (c.seed + t) >>> 0,
    };
    const rm = RewardModel.create(it.reward_model_name ?? this.modelDirs[0], this.agents.length, o);
    const prefs = pairs.map((p) => ({ prompts: p.prompts, chosen: p.chosen.map((x) => x.text), rejected: p.rejected.map((x) => x.text) }));
    const { logs } = trainRewardModel(rm, prefs, o);
    const last = logs.at(-1);
    if (last) this.logger.always(this.envStep, { 'reward_model/loss': last.loss, 'reward_model/accuracy': last.accuracy, 'reward_model/margin': last.margin });
    this.rolloutCtx = { ...this.ctx, task: rewardModelTask(this.task, rm, this.agents.length) };
    try {
      for (this.epoch = 0; this.epoch < c.num_train_epochs; this.epoch++) {
        for (this.index = 0; this.index < this.task.dataset.length; this.index++) {
          await this.trainStep(this.task.dataset[this.index], this.index);
          this.items++;
          await this.flushLogs();
        }
        await this.drain(this.buffers.flatMap((b, i) => (b.length ? [i] : [])));
      }
    } finally {
      this.rolloutCtx = this.ctx;
      this.epoch = 0;
      this.index = 0;
    }
    if (it.preference_scoring_reward === 'reward_model') {
      this.scoringModel = rm;
      if (c.output_dir) rm.save(join(c.output_dir, 'reward_models', label(t)));
    }
  }

  private async probeLogprobs(samples: DriftProbe['samples']): Promise<number[][][]> {
    return forEachAgent(this.agents, (a) => a.sequenceLogprobs(samples[a.index].map((s) => ({ ...s, advantages: [], oldLogprobs: [] }))));
  }

  /** Step 5: the probe's drift per agent, logged as drift/agent_i/logratio_prev and drift/agent_i/logratio_initial. */
  private async logDrift(): Promise<void> {
    const probe = this.state.probe;
    if (!probe) return;
    const now = await this.probeLogprobs(probe.samples);
    const m: Record<string, number> = {};
    for (const a of this.agents) {
      const lengths = probe.samples[a.index].flatMap((s) => s.completions.map((x) => x.length));
      const flat = (x: number[][][]) => x[a.index].flat();
      m[`drift/agent_${a.index}/logratio_prev`] = meanLogRatio(lengths, flat(now), flat(probe.last));
      m[`drift/agent_${a.index}/logratio_initial`] = meanLogRatio(lengths, flat(now), flat(probe.initial));
    }
    this.logger.always(this.envStep, m);
    probe.last = now;
  }

  private snapshots(): string {
    if (this.snapshotRoot === null) {
      const out = this.config.output_dir;
      this.tempSnapshots = out === null;
      this.snapshotRoot = out ? join(out, 'policy_checkpoints') : mkdtempSync(join(tmpdir(), 'magrpo-history-'));
    }
    return this.snapshotRoot;
  }

  /** The team's weights under policy_checkpoints/<name>/agent_i, for the history comparator. */
  private async snapshot(name: string): Promise<void> {
    const dir = join(this.snapshots(), name);
    await forEachAgent(this.agents, (a) => a.save(join(dir, `agent_${a.index}`)));
  }

  override async close(): Promise<void> {
    if (this.tempSnapshots && this.snapshotRoot) rmSync(this.snapshotRoot, { recursive: true, force: true });
    await super.close();
  }
}
