/**
 * The rollout backend seam: where an agent's completions come from. `LocalSampler` samples
 * in-process with the agent's own model (the default); `OpenAISampler`
 * (rollout/openai.ts) asks OpenAI-compatible inference servers. The agent owns the learner
 * weights either way: a remote sampler is told about every new version through `loadWeights`, and
 * the agent re-scores remote completions with its own engine (rl/agent.ts).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Rng } from '../engine/rng.js';
import { LanguageModel, type TextSample } from '../model/pretrained.js';
import type { SamplingParams } from '../model/sample.js';
import type { Prompt } from '../model/tokenizer.js';
import { OpenAISampler, requestSeeds } from '../rollout/openai.js';
import type { MagrpoConfig } from './config.js';

/** The `rollout` config block plus where adapters go (null for the local backend); plain data (it crosses worker boundaries). */
export type RolloutSpec = MagrpoConfig['rollout'] & { adapterDir: string | null };

/** Sampling settings of one call (the trainer's `samplingParams`). */
export type { SamplingParams } from '../model/sample.js';

/** One prompt and how many completions to sample for it. */
export interface SampleRequest {
  /** Text, or chat messages for the model's template (tokenizer.ts promptIds). */
  prompt: Prompt;
  n: number;
}

/** One sampled completion as the sampler saw it. */
export interface SampledCompletion {
  /** Completion token ids, including a final EOS / the tokens of a stop string. */
  ids: number[];
  /** Completion text without special tokens, cut before a stop string. */
  text: string;
  /**
   * The sampler's log π(token | prefix) per token of `ids` (unmodified model distribution). Empty
   * when the sampler could not give them per token of `ids` (re-tokenised text that did not line up).
   */
  logprobs: number[];
}

/** A request's answer: the prompt's token ids and its `n` completions. */
export interface SampledPrompt {
  promptIds: number[];
  completions: SampledCompletion[];
}

/** Where completions come from. */
export interface Sampler {
  /** 'local': the agent's own model, same weights; anything else is off-policy by rounding at least. */
  readonly kind: 'local' | 'openai';
  /** Samples `n` completions for each request; answers in request order. */
  generate(requests: readonly SampleRequest[], params: SamplingParams): Promise<SampledPrompt[]>;
  /**
   * Makes `name` the weights every later request samples from; `write(dir)` saves them (a PEFT
   * adapter folder) where the sampler wants. Absent for samplers that share the agent's weights.
   */
  loadWeights?(name: string, write: (dir: string) => void): Promise<void>;
  /** Counters since the last call, as metric name → value (e.g. the re-tokenisation mismatch rate). */
  takeStats?(): Record<string, number>;
  close?(): Promise<void>;
}

/**
 * Today's in-process sampler: one batch over every request's `n` copies, drawn from the agent's
 * RNG. It calls `lm.sample` at call time, so a replaced `lm.sample` (test doubles) is honoured.
 * With `seedPerRequest` it draws one seed per request from the agent's RNG, as the openai backend
 * does (requestSeeds), and each request's rows draw from their own Rng(seed), as `magrpo serve`
 * samples a seeded request: still one batch, and the same tokens as the server's.
 */
export class LocalSampler implements Sampler {
  readonly kind = 'local';

  constructor(
    private readonly lm: LanguageModel,
    private readonly rng: Rng,
    private readonly seedPerRequest = false,
  ) {}

  async generate(requests: readonly SampleRequest[], params: SamplingParams): Promise<SampledPrompt[]> {
    const { prompts, rowRngs } = this.rows(requests);
    return this.answers(requests, this.lm.sample(prompts, { ...params, rng: this.rng, rowRngs }));
  }

  /**
   * The samples of several local samplers whose models share one base, in one batch
   * (`LanguageModel.sampleTogether`): each sampler's rows draw from its own random state as its
   * `generate` would. Null when they cannot (`LanguageModel.sampleTogetherProblem`: no shared
   * base, another tokenizer, prompts that stop on other tokens; a replaced `lm.sample`, or the
   * MAGRPO_TEAM_DECODE=0 switch): then each samples alone.
   */
  static generateTogether(samplers: readonly Sampler[], requests: readonly (readonly SampleRequest[])[], params: SamplingParams): SampledPrompt[][] | null {
    if (!teamDecode || samplers.length < 2) return null;
    const local = samplers.filter((s): s is LocalSampler => s instanceof LocalSampler);
    if (local.length !== samplers.length || local.some((s) => s.lm.sample !== LanguageModel.prototype.sample)) return null;
    // Before `rows`, which draws the request seeds: a refused call samples alone from the same state.
    const members = local.map((s, i) => ({ lm: s.lm, prompts: requests[i].map((r) => r.prompt) }));
    if (LanguageModel.sampleTogetherProblem(members, params) !== null) return null;
    const rows = local.map((s, i) => s.rows(requests[i]));
    const out = LanguageModel.sampleTogether(
      local.map((s, i) => ({ lm: s.lm, prompts: rows[i].prompts, rng: s.rng, rowRngs: rows[i].rowRngs })),
      params,
    );
    return local.map((s, i) => s.answers(requests[i], out[i]));
  }

  /** The batch rows of `requests` (each prompt `n` times) and, with `seedPerRequest`, each row's random source. */
  private rows(requests: readonly SampleRequest[]): { prompts: Prompt[]; rowRngs?: Rng[] } {
    const prompts = requests.flatMap((r) => new Array<Prompt>(r.n).fill(r.prompt));
    const rowRngs = this.seedPerRequest
      ? requestSeeds(this.rng, requests.length).flatMap((seed, k) => new Array<Rng>(requests[k].n).fill(new Rng(seed)))
      : undefined;
    return { prompts, rowRngs };
  }

  /** The rows' samples as answers per request. */
  private answers(requests: readonly SampleRequest[], out: readonly TextSample[]): SampledPrompt[] {
    const answers: SampledPrompt[] = [];
    let i = 0;
    for (const r of requests) {
      const mine = out.slice(i, i + r.n);
      i += r.n;
      answers.push({
        promptIds: mine[0]?.promptIds ?? this.lm.tokenizer.promptIds(r.prompt),
        completions: mine.map((s) => ({ ids: s.completionIds, text: s.text, logprobs: s.logprobs })),
      });
    }
    return answers;
  }
}

// MAGRPO_TEAM_DECODE=0 has agents on one base model sample one after another (A/B benchmarks).
let teamDecode = process.env.MAGRPO_TEAM_DECODE !== '0';

/** Turns sampling agents that share a base model in one batch off or on again, for comparisons and tests. */
export function setTeamDecode(on: boolean): void {
  teamDecode = on;
}

/** The sampler a rollout spec asks for (none or backend local: in-process). */
export function createSampler(spec: RolloutSpec | undefined, lm: LanguageModel, rng: Rng, log?: (message: string) => void): Sampler {
  if (!spec || spec.backend === 'local') return new LocalSampler(lm, rng, spec?.seed_per_request ?? false);
  if (spec.adapterDir === null) throw new Error('rollout.backend openai: no adapter folder (rolloutSpec resolves one)');
  const apiKey = spec.api_key_env === null ? null : (process.env[spec.api_key_env] ?? null);
  return new OpenAISampler(
    lm,
    rng,
    {
      servers: spec.servers,
      apiKey,
      apiKeyEnv: spec.api_key_env,
      timeoutMs: spec.timeout_s * 1000,
      maxConcurrency: spec.max_concurrency,
      maxRetries: spec.max_retries,
      backoffMs: spec.backoff_s * 1000,
      maxBackoffMs: spec.max_backoff_s * 1000,
      maxFailures: spec.max_failures,
      maxResponseBytes: Math.round(spec.max_response_mb * 2 ** 20),
      balance: spec.balance,
      promptFormat: spec.prompt_format,
      adapterDir: spec.adapterDir,
      deleteOldAdapters: !spec.keep_adapters,
      weightSync: spec.weight_sync,
      extraBody: spec.extra_body,
    },
    log,
  );
}

/**
 * The rollout spec of a run: the config's `rollout` block with its adapter folder resolved
 * (rollout.adapter_dir, else <output_dir>/adapters, else a fresh temporary folder); undefined for
 * the local backend (without adapter folder when it seeds per request).
 */
export function rolloutSpec(c: MagrpoConfig): RolloutSpec | undefined {
  if (c.rollout.backend === 'local') return c.rollout.seed_per_request ? { ...c.rollout, adapterDir: null } : undefined;
  const adapterDir = c.rollout.adapter_dir ?? (c.output_dir ? join(c.output_dir, 'adapters') : mkdtempSync(join(tmpdir(), 'magrpo-adapters-')));
  return { ...c.rollout, adapterDir };
}
