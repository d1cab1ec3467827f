/**
 * Sampling on OpenAI-compatible inference servers (vLLM dialect): one POST /v1/completions per
 * prompt with `n` completions, asking for the sampled token ids (vLLM's
 * `return_tokens_as_token_ids`) and their log-probs, so the trainer gets exactly the tokens the
 * server sampled. Servers that return text without ids (llama.cpp) are handled by re-tokenising the
 * text locally, with a warning once and a measured mismatch rate (`takeStats`).
 *
 * The weights a request samples from are named by its `model`: each agent's LoRA adapter is loaded
 * on every server under a new versioned name (adapters.ts) before requests use it, so no request
 * ever mixes two versions. Structurally this is a `Sampler` of rl/sampler.ts (the rl floor sits
 * above this one and imports it, not the other way round).
 */
import type { Rng } from '../engine/rng.js';
import type { SamplingParams } from '../model/sample.js';
import type { Prompt, TextTokenizer } from '../model/tokenizer.js';
import { AdapterLoader } from './adapters.js';
import { type PoolOptions, RolloutError, ServerPool } from './pool.js';
import { type ParsedChoice, parseCompletionResponse, ResponseShapeError } from './vllm.js';

/** Everything the client needs besides the agent's model; plain data. */
export interface OpenAIClientOptions extends Omit<PoolOptions, 'log'> {
  /** Send prompts as token ids (exactly the learner's tokens) or as text. */
  promptFormat: 'token_ids' | 'text';
  /** Folder (shared with the servers) where adapter versions are written. */
  adapterDir: string;
  /** Delete an adapter version's folder once every server has unloaded it. */
  deleteOldAdapters: boolean;
  /**
   * 'lora' (default): each new adapter version is loaded on the servers and requests name it.
   * 'none': nothing is loaded; requests name no model, so servers answer with the model they were
   * started with (servers that cannot load adapters at runtime, such as llama.cpp's).
   */
  weightSync?: 'lora' | 'none';
  /** Further fields of every request body (rollout.extra_body); the client's own fields win. */
  extraBody?: Readonly<Record<string, unknown>>;
}

/** What the client needs of the agent's model: its tokenizer, EOS ids and vocabulary size. */
export interface ClientModel {
  tokenizer: TextTokenizer;
  stopIds(): number[];
  readonly model: { readonly vocabSize: number };
}

export interface ClientCompletion {
  ids: number[];
  text: string;
  /** Per token of `ids`; empty when the server's tokens could not be lined up with `ids`. */
  logprobs: number[];
}

export class OpenAISampler {
  readonly kind = 'openai';
  readonly pool: ServerPool;
  private readonly adapters: AdapterLoader;
  private model: string | null = null;
  private warnedNoIds = false;
  private warnedNoSync = false;
  private warnedShortN = false;
  private readonly counts = { completions: 0, retokenized: 0, mismatched: 0, noLogprobs: 0 };

  constructor(
    private readonly lm: ClientModel,
    private readonly rng: Rng,
    private readonly opts: OpenAIClientOptions,
    private readonly log: (message: string) => void = (m) => process.stderr.write(`[magrpo] ${m}\n`),
  ) {
    this.pool = new ServerPool({ ...opts, log });
    this.adapters = new AdapterLoader(this.pool, opts.adapterDir, opts.deleteOldAdapters, log);
  }

  /** The model name requests use (the current adapter version), null before the first load. */
  get currentModel(): string | null {
    return this.model;
  }

  /** Writes adapter `name` with `write(dir)`, loads it on every server, then unloads the previous one. */
  async loadWeights(name: string, write: (dir: string) => void): Promise<void> {
    if (this.opts.weightSync === 'none') {
      if (!this.warnedNoSync) {
        this.warnedNoSync = true;
        this.log(
          `rollout.weight_sync none: the agent's updates are not sent to ${this.pool.live().join(', ')}; they keep sampling from the model they were started with (off-policy after the first update, weighted by TIS, rollout.tis_cap)`,
        );
      }
      this.model = name;
      return;
    }
    await this.adapters.publish(name, write);
    this.model = name;
  }

  async generate(
    requests: readonly { prompt: Prompt; n: number }[],
    params: SamplingParams,
  ): Promise<{ promptIds: number[]; completions: ClientCompletion[] }[]> {
    const model = this.model;
    if (model === null) throw new RolloutError('not_found', 'openai rollout backend: no adapter loaded yet (loadWeights must run before generate)');
    // Seeds are drawn up front, in request order, so a run is reproducible whatever the servers' timing.
    const seeds = requestSeeds(this.rng, requests.length);
    return Promise.all(
      requests.map(async (r, k) => {
        const promptIds = this.lm.tokenizer.promptIds(r.prompt);
        const completions: ClientCompletion[] = [];
        for (let round = 0; completions.length < r.n; round++) {
          const want = r.n - completions.length;
          const seed = round === 0 ? seeds[k] : (seeds[k] + round * 7919) % 2 ** 31;
          const { server, text } = await this.pool
            .post('/v1/completions', this.body(model, this.lm.tokenizer.renderPrompt(r.prompt), promptIds, want, params, seed))
            .catch((e: unknown) => {
              throw this.explain(e);
            });
          const choices = parseBody(text, server);
          if (choices.length === 0) throw new RolloutError('bad_response', `${server} answered no choices for n = ${want}`, server);
          if (choices.length < want && round === 0 && !this.warnedShortN) {
            this.warnedShortN = true;
            this.log(`${server} returned ${choices.length} of n = ${want} completions per request; asking again for the rest (said once)`);
          }
          for (const c of choices.slice(0, want)) completions.push(this.completion(c, server, params.stopStrings));
        }
        return { promptIds, completions };
      }),
    );
  }

  /** Counters since the last call: share of completions re-tokenised and of those that did not line up. */
  takeStats(): Record<string, number> {
    const c = this.counts;
    const out: Record<string, number> = { rollout_servers: this.pool.live().length };
    if (c.completions > 0) {
      out.rollout_retokenized_frac = c.retokenized / c.completions;
      out.rollout_missing_logprobs_frac = c.noLogprobs / c.completions;
    }
    if (c.retokenized > 0) out.rollout_retokenize_mismatch_frac = c.mismatched / c.retokenized;
    Object.assign(this.counts, { completions: 0, retokenized: 0, mismatched: 0, noLogprobs: 0 });
    return out;
  }

  /**
   * A failure to send a token-id prompt, said as such: llama.cpp's server (llama-cpp-python) takes
   * text prompts only and answers a list of ids with a 500 whose message is pydantic's "Input
   * should be a valid string" for field prompt.
   */
  private explain(e: unknown): unknown {
    if (!(e instanceof RolloutError) || this.opts.promptFormat !== 'token_ids' || !/prompt/.test(e.message) || !/valid string|string_type/i.test(e.message))
      return e;
    return new RolloutError(
      e.kind,
      `${e.message}\nThe server refuses prompts given as token ids (llama.cpp's server takes text only): set rollout.prompt_format: text`,
      e.server,
      e.status,
    );
  }

  /** The /v1/completions request body (OpenAI fields plus vLLM's extensions, after rollout.extra_body): the one place `SamplingParams` become wire names. */
  private body(model: string, prompt: string, promptIds: number[], n: number, p: SamplingParams, seed: number): Record<string, unknown> {
    return {
      ...this.opts.extraBody,
      ...(this.opts.weightSync === 'none' ? {} : { model }),
      prompt: this.opts.promptFormat === 'token_ids' ? promptIds : prompt,
      n,
      max_tokens: p.maxNewTokens,
      temperature: p.temperature,
      top_p: p.topP,
      ...(p.topK === null ? {} : { top_k: p.topK }),
      ...(p.stopStrings.length ? { stop: [...p.stopStrings] } : {}),
      seed,
      logprobs: 1,
      // vLLM extensions (other servers ignore unknown fields):
      return_tokens_as_token_ids: true,
      skip_special_tokens: false,
      include_stop_str_in_output: true,
    };
  }

  /** One choice as the trainer's completion: ids, text cut before a stop string, sampler log-probs. */
  private completion(c: ParsedChoice, server: string, stops: readonly string[]): ClientCompletion {
    if (c.logprobs === null)
      throw new RolloutError(
        'bad_response',
        `${server} returned no log-probs although the request asked for them (field "logprobs": 1): this server ignores "logprobs", which the off-policy correction needs; use a server that supports it (vLLM, magrpo serve)`,
        server,
      );
    this.counts.completions++;
    const tok = this.lm.tokenizer;
    let ids: number[];
    let logprobs: (number | null)[] = c.logprobs;
    if (c.tokenIds !== null) {
      ids = c.tokenIds;
      const bad = ids.find((id) => !(id >= 0 && id < this.lm.model.vocabSize));
      if (bad !== undefined)
        throw new RolloutError(
          'bad_response',
          `${server} returned token id ${bad}, outside the agent's vocabulary of ${this.lm.model.vocabSize}: the server runs another model or tokenizer than the agent`,
          server,
        );
    } else {
      const r = this.retokenize(c, server, stops);
      ids = r.ids;
      this.counts.retokenized++;
      const tokens = c.tokens ?? [];
      // An EOS put back by retokenize is not among the server's tokens (llama.cpp leaves it out).
      const own = r.addedEos ? ids.slice(0, -1) : ids;
      const lined = tokens.length === own.length && own.every((id, k) => tok.decode([id]) === tokens[k]);
      if (!lined) {
        this.counts.mismatched++;
        logprobs = [];
      }
    }
    let sampler: number[] = [];
    if (logprobs.length === ids.length && logprobs.every((x) => x !== null)) sampler = logprobs as number[];
    else if (logprobs.length > 0) this.counts.noLogprobs++;
    return { ids, text: cutAtStop(tok.decode(ids, { skipSpecialTokens: true }), stops), logprobs: sampler };
  }

  /**
   * Ids for a server that returned only text: encode what it sampled, and put back the EOS the text
   * omits. What it sampled is the concatenation of its log-prob token strings when the text is a
   * prefix of it: llama.cpp cuts a stop string out of `text` (it ignores include_stop_str_in_output)
   * but lists every sampled token, and the trainer keeps the tokens of a stop string, as the local
   * sampler does. Otherwise (tokens missing, or bytes the server dropped from its per-token
   * strings), the text itself.
   */
  private retokenize(c: ParsedChoice, server: string, stops: readonly string[]): { ids: number[]; addedEos: boolean } {
    if (!this.warnedNoIds) {
      this.warnedNoIds = true;
      this.log(
        `warning: ${server} returns text without token ids (vLLM's "return_tokens_as_token_ids"); re-tokenising its text locally. Tokens may differ from those sampled: the share that does not line up with the server's tokens is logged as agent_i/rollout_retokenize_mismatch_frac${this.opts.extraBody && Object.keys(this.opts.extraBody).length ? '' : '. A llama.cpp server also samples with its own defaults (top_k 40, min_p 0.05, repeat_penalty 1.1) unless rollout.extra_body turns them off (docs/scale.md)'}`,
      );
    }
    const joined = c.tokens?.join('') ?? null;
    const sampled = joined !== null && joined.startsWith(c.text) ? joined : c.text;
    const ids = this.lm.tokenizer.encode(sampled, { addSpecialTokens: false });
    const eos = this.lm.stopIds();
    const endedOnEos = c.finishReason === 'stop' && (c.stopReason === null || typeof c.stopReason === 'number') && !stops.some((s) => sampled.includes(s));
    const addedEos = endedOnEos && !eos.includes(ids[ids.length - 1]);
    if (addedEos) ids.push(typeof c.stopReason === 'number' ? c.stopReason : eos[0]);
    return { ids, addedEos };
  }

  async close(): Promise<void> {}
}

/**
 * The `seed` of each of `count` requests, drawn in request order from the agent's RNG (one draw
 * each). The local sampler with rollout.seed_per_request draws the same seeds and samples each
 * prompt's group with its own Rng(seed), as magrpo serve does, so both give the same tokens.
 */
export function requestSeeds(rng: Rng, count: number): number[] {
  return Array.from({ length: count }, () => Math.floor(rng.next() * 2 ** 31));
}

/** Text before the first stop string (all of it when none occurs), as the local sampler cuts. */
export function cutAtStop(text: string, stops: readonly string[]): string {
  const at = stops.map((s) => text.indexOf(s)).filter((i) => i >= 0);
  return at.length ? text.slice(0, Math.min(...at)) : text;
}

function parseBody(text: string, server: string): ParsedChoice[] {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new RolloutError('bad_response', `${server}/v1/completions answered something that is not JSON: ${text.slice(0, 120)}`, server);
  }
  try {
    return parseCompletionResponse(body, `${server}/v1/completions`);
  } catch (e) {
    if (e instanceof ResponseShapeError) throw new RolloutError('bad_response', e.message, server);
    throw e;
  }
}
