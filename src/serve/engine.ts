/**
 * The generation engine behind `magrpo serve`: continuous batching over the KV-cache decoder.
 *
 * Requests arrive as sequence groups (one prompt × n completions, one sampling spec, one seed).
 * A single loop drives one `Decoder` (model/sample.ts) a step at a time for every running row;
 * between two steps the event loop turns, so HTTP requests that arrived meanwhile are admitted
 * (prefilled on their own, their cache rows merged into the running batch) before the next step.
 * Rows that finish drop out at once. Requests for the base model and for any loaded LoRA adapter
 * share one batch (multi-LoRA, as vLLM serves adapters): each row decodes under its own request's
 * adapter over the one copy of the base weights (model/sample.ts `adapters`), so the agents of a
 * rollout, each with its adapter, cost one read of the base weights per step. Admission is FIFO.
 *
 * Seeds: each group has its own Rng seeded with the request's `seed` and its own decode rule, so
 * the decoder draws for it exactly as `generate()` does for a batch holding only that group: with
 * a seed the n completions of a prompt equal `LanguageModel.sample(Array(n).fill(prompt), { rng:
 * seed, … })` token for token, whatever else shares the batch.
 */
import { PackScope } from '../engine/packed.js';
import { Rng } from '../engine/rng.js';
import { noGrad } from '../engine/tensor.js';
import { loadLora } from '../model/lora.js';
import type { LanguageModel } from '../model/pretrained.js';
import { type DecodeRule, Decoder, type FinishReason, type Picked, type SampleOptions, type SamplingParams } from '../model/sample.js';
import type { LoraAdapter } from '../model/transformer.js';

/**
 * How one group samples: the shared knobs (maxNewTokens ≥ 1; stop strings match the completion
 * decoded with special tokens skipped; stop ids hold EOS unless the request ignores it), plus what
 * only the server has.
 */
export interface SamplingSpec extends SamplingParams, Required<Pick<SampleOptions, 'stopTokenIds'>> {
  /** How many most likely alternatives to report per token (0 = none). */
  topLogprobs: number;
  /** Seed of the group's Rng (uint32). */
  seed: number;
}

/** One generated token of one completion. */
export interface TokenEvent {
  token: number;
  /** log π(token | prefix) under the unmodified model distribution (no temperature). */
  logprob: number;
  /** The `topLogprobs` most likely tokens at this position, most likely first. */
  top: { id: number; logprob: number }[];
  /** Set on the completion's last token. */
  finish?: FinishReason;
}

/** A prompt and its n completions, sampled together. */
export interface GroupRequest {
  /** The base model's name or a loaded adapter's. */
  model: string;
  promptIds: readonly number[];
  n: number;
  spec: SamplingSpec;
  /** Called for every token of completion `index` (0 ≤ index < n), in order. */
  onToken(index: number, ev: TokenEvent): void;
  /** True once the client has gone: the group's rows are dropped at the next step. */
  cancelled?: () => boolean;
}

/** Counters for /stats and the tests: evidence that batching happens. */
export interface EngineStats {
  groupsSubmitted: number;
  groupsFinished: number;
  decodeSteps: number;
  /** Most rows ever decoded in one step. */
  maxRowsInStep: number;
  /** Groups admitted while other rows were already decoding. */
  joinedMidFlight: number;
  /** Rows currently decoding, groups waiting. */
  running: number;
  queued: number;
}

export class EngineClosedError extends Error {}

/** Thrown at admission when a queued request's adapter was unloaded meanwhile. */
export class UnknownModelError extends Error {
  constructor(readonly model: string) {
    super(`The model \`${model}\` does not exist.`);
  }
}

interface Group {
  req: GroupRequest;
  rng: Rng;
  /** The spec as the decoder reads it; one object per group, so each group is picked on its own. */
  rule: DecodeRule;
  lora: Map<string, LoraAdapter> | null;
  remaining: number;
  resolve: () => void;
  reject: (e: Error) => void;
}

/** A decoding row: completion `index` of `group`. */
interface Row {
  group: Group;
  index: number;
}

export interface EngineOptions {
  /** Most completion rows decoded together; a larger single group still runs, alone. */
  maxBatch: number;
}

export class BatchEngine {
  private readonly adapters = new Map<string, Map<string, LoraAdapter>>();
  private readonly queue: Group[] = [];
  private readonly decoder: Decoder<Row>;
  private wake: (() => void) | null = null;
  private closed = false;
  private readonly loop: Promise<void>;
  private readonly packs = new PackScope();
  readonly stats: EngineStats = { groupsSubmitted: 0, groupsFinished: 0, decodeSteps: 0, maxRowsInStep: 0, joinedMidFlight: 0, running: 0, queued: 0 };

  constructor(
    readonly lm: LanguageModel,
    /** Name the base model is served under. */
    readonly baseName: string,
    private readonly opts: EngineOptions,
  ) {
    if (!(Number.isInteger(opts.maxBatch) && opts.maxBatch >= 1)) throw new Error(`maxBatch must be an integer ≥ 1, got ${opts.maxBatch}`);
    lm.model.lora.clear();
    this.decoder = new Decoder(lm.model);
    this.loop = this.run();
  }

  /** Served model names: the base first, then adapters in load order. */
  models(): string[] {
    return [this.baseName, ...this.adapters.keys()];
  }

  hasModel(name: string): boolean {
    return name === this.baseName || this.adapters.has(name);
  }

  /** Loads a PEFT LoRA folder under `name` (throws CheckpointError for a bad folder). */
  loadAdapter(name: string, dir: string): void {
    if (this.hasModel(name)) throw new Error(`the adapter '${name}' has already been loaded`);
    const model = this.lm.model;
    const saved = new Map(model.lora);
    try {
      loadLora(model, dir);
      this.adapters.set(name, new Map(model.lora));
    } finally {
      model.lora.clear();
      for (const [k, v] of saved) model.lora.set(k, v);
    }
  }

  /** Removes an adapter; rows already decoding with it finish with the weights they started with. */
  unloadAdapter(name: string): boolean {
    return this.adapters.delete(name);
  }

  /** Queues a group; resolves when its n completions are finished (or it was cancelled). */
  submit(req: GroupRequest): Promise<void> {
    if (this.closed) return Promise.reject(new EngineClosedError('the server is shutting down'));
    if (!this.hasModel(req.model)) return Promise.reject(new UnknownModelError(req.model));
    this.stats.groupsSubmitted++;
    const { spec } = req;
    const decode = (ids: number[]) => this.lm.tokenizer.decode(ids, { skipSpecialTokens: true });
    const rule: DecodeRule = { ...spec, stopIds: new Set(spec.stopTokenIds), decode };
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ req, rng: new Rng(spec.seed), rule, lora: null, remaining: req.n, resolve, reject });
      this.stats.queued = this.queue.length;
      this.wake?.();
    });
  }

  /** Groups waiting for admission. */
  get queued(): number {
    return this.queue.length;
  }

  /** Stops the loop; running and queued groups are rejected with EngineClosedError. */
  async close(): Promise<void> {
    this.closed = true;
    this.wake?.();
    await this.loop;
  }

  private async run(): Promise<void> {
    while (!this.closed) {
      if (this.decoder.running.length === 0 && this.queue.length === 0) {
        await new Promise<void>((r) => {
          this.wake = r;
        });
        this.wake = null;
        continue;
      }
      try {
        // The base weights never change while serving: packed once, for every step (engine/packed.ts).
        this.packs.run(() =>
          noGrad(() => {
            this.admit();
            this.step();
          }),
        );
      } catch (e) {
        this.failRunning(e as Error);
      }
      this.stats.running = this.decoder.running.length;
      this.stats.queued = this.queue.length;
      // Let HTTP I/O run: new requests join before the next step.
      await new Promise<void>((r) => setImmediate(r));
    }
    const err = new EngineClosedError('the server is shutting down');
    this.failRunning(err);
    for (const g of this.queue.splice(0)) g.reject(err);
  }

  private failRunning(err: Error): void {
    const groups = new Set(this.decoder.clear().map((s) => s.tag.group));
    for (const g of groups) g.reject(err);
  }

  /**
   * Takes queued groups in FIFO order while they fit in maxBatch, whatever their adapter;
   * prefills them together and merges their cache rows into the running batch.
   */
  private admit(): void {
    const admitted: Group[] = [];
    let rows = this.decoder.running.length;
    const running = rows > 0;
    while (this.queue.length > 0) {
      const g = this.queue[0];
      const name = g.req.model;
      if (name !== this.baseName && !this.adapters.has(name)) {
        this.queue.shift();
        g.reject(new UnknownModelError(name));
        continue;
      }
      const lora = name === this.baseName ? null : (this.adapters.get(name) ?? null);
      if (rows > 0 && rows + g.req.n > this.opts.maxBatch) break;
      if (g.req.cancelled?.()) {
        this.queue.shift();
        g.resolve();
        continue;
      }
      this.queue.shift();
      g.lora = lora;
      admitted.push(g);
      rows += g.req.n;
    }
    if (admitted.length === 0) return;
    if (running) this.stats.joinedMidFlight += admitted.length;
    const requests = admitted.flatMap((group) =>
      Array.from({ length: group.req.n }, (_, index) => ({
        tag: { group, index },
        prompt: group.req.promptIds,
        rule: group.rule,
        rng: group.rng,
        adapters: group.lora,
      })),
    );
    this.deliver(this.decoder.admit(requests));
  }

  /** One decode step for every running row; rows of cancelled groups leave first. */
  private step(): void {
    this.decoder.retire((s) => s.tag.group.req.cancelled?.() === true);
    const R = this.decoder.running.length;
    if (R === 0) return;
    const picked = this.decoder.step();
    this.stats.decodeSteps++;
    this.stats.maxRowsInStep = Math.max(this.stats.maxRowsInStep, R);
    this.deliver(picked);
  }

  /** Hands each picked token to its group, in row order; a group resolves with its last completion. */
  private deliver(picked: Picked<Row>[]): void {
    for (const { seq, token, logprob, top, finish } of picked) {
      const { group, index } = seq.tag;
      const ev: TokenEvent = { token, logprob, top };
      if (finish !== null) ev.finish = finish;
      group.req.onToken(index, ev);
      if (finish !== null) {
        group.remaining--;
        if (group.remaining === 0) {
          this.stats.groupsFinished++;
          group.resolve();
        }
      }
    }
  }
}
