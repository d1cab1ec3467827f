/**
 * The models `magrpo bench` runs, what each costs in FLOPs per token, and the measurement of one
 * size in a worker process (sampling tokens/s at each batch, training tokens/s with every weight
 * trained and, where asked, with LoRA adapters only, peak RSS).
 */

import { nativePrecision } from '../engine/backends/native.js';
import { BufferPool } from '../engine/buffer-pool.js';
import { crossEntropy } from '../engine/nn.js';
import { AdamW } from '../engine/optim.js';
import { Rng } from '../engine/rng.js';
import { setBackend, setPrecision } from '../engine/runtime.js';
import { backward, type Tensor } from '../engine/tensor.js';
import { architectureOf } from '../model/architectures/index.js';
import { parseModelConfig } from '../model/hf-config.js';
import { createModel } from '../model/load.js';
import { applyLora, type LoraConfig } from '../model/lora.js';
import { generate } from '../model/sample.js';
import type { CausalLM } from '../model/transformer.js';

export const TRAIN_BATCH = 8;
export const TRAIN_SEQ = 128;
export const SAMPLE_BATCHES = [8, 32];
/**
 * Untimed training steps first, at least 2 and then up to 100 within 8 s, for every engine alike:
 * the first steps also allocate optimizer state, grow the heap and let the JIT settle; a real run
 * takes thousands. Measured at 1m with 2 threads: the heap keeps growing (and page-faulting,
 * ~1,000 faults and 10-15 ms of kernel time per 70 ms step) for the first ~50 steps, then stays; 5
 * warm-up steps timed that growth, not the steady state a training run spends its time in.
 */
export const TRAIN_WARMUP = { min: 2, max: 100, seconds: 8 };
/**
 * Untimed sampling runs first, per batch, for every engine alike: at least 1, then up to 50 within
 * 2 s. Measured at 1m b8 (2 threads, AMD EPYC Zen 5): magrpo's first ~15 runs take 2-3x the
 * steady 11-12 ms while the JIT settles and the heap grows; one warm-up run timed that, not the
 * thousands of sampling calls an RL run makes.
 */
export const SAMPLE_WARMUP = { min: 1, max: 50, seconds: 2 };
export const PROMPT_LEN = 16;
export const NEW_TOKENS = 64;

/** LoRA training in the bench: rank 16 on every linear layer of every block (PEFT's "all-linear"). */
export const LORA_RANK = 16;
export const LORA_ALPHA = 32;

/** One benchmarked model. */
export interface SizeSpec {
  label: string;
  /** The HF config.json it would have (random weights). */
  hf: Record<string, unknown>;
  /** Sequences of TRAIN_SEQ tokens per training step (default TRAIN_BATCH): smaller where memory demands. */
  trainBatch?: number;
  /** Also measure LoRA training (rank LORA_RANK on every linear layer), not only full fine-tuning. */
  lora?: boolean;
}

/** The benchmarked models; `--sizes` defaults to DEFAULT_SIZES, the others are opt-in. */
export const SIZES: Record<string, SizeSpec> = {
  '1m': {
    label: 'Llama-style, L4 C128 H4/2kv F352 V2048',
    hf: {
      model_type: 'llama',
      vocab_size: 2048,
      hidden_size: 128,
      intermediate_size: 352,
      num_hidden_layers: 4,
      num_attention_heads: 4,
      num_key_value_heads: 2,
      max_position_embeddings: 512,
      rms_norm_eps: 1e-5,
      tie_word_embeddings: true,
    },
  },
  '10m': {
    label: 'Llama-style, L4 C384 H6/2kv F1024 V8192',
    hf: {
      model_type: 'llama',
      vocab_size: 8192,
      hidden_size: 384,
      intermediate_size: 1024,
      num_hidden_layers: 4,
      num_attention_heads: 6,
      num_key_value_heads: 2,
      max_position_embeddings: 1024,
      rms_norm_eps: 1e-5,
      tie_word_embeddings: true,
    },
  },
  '124m': {
    label: 'GPT-2 small, L12 C768 H12 V50257 ctx 1024',
    hf: { model_type: 'gpt2', vocab_size: 50257, n_embd: 768, n_layer: 12, n_head: 12, n_positions: 1024, layer_norm_epsilon: 1e-5 },
  },
  // Qwen/Qwen2.5-0.5B's config.json (model keys only): qwen2 has q/k/v biases, which the engine
  // implements (test/model/pytorch-parity.test.ts checks tiny-qwen2 against PyTorch).
  // fp32 full fine-tuning holds weights, gradients and AdamW's two moments, 4 × 494M floats
  // ≈ 7.9 GB, plus activations: 4 sequences per step instead of 8 (measured peaks: magrpo 9.9 GB, PyTorch 12 GB).
  '500m': {
    label: 'Qwen2.5-0.5B shapes, L24 C896 H14/2kv F4864 V151936, q/k/v bias, tied',
    hf: {
      model_type: 'qwen2',
      vocab_size: 151936,
      hidden_size: 896,
      intermediate_size: 4864,
      num_hidden_layers: 24,
      num_attention_heads: 14,
      num_key_value_heads: 2,
      max_position_embeddings: 32768,
      rms_norm_eps: 1e-6,
      rope_theta: 1000000,
      tie_word_embeddings: true,
      use_sliding_window: false,
    },
    trainBatch: 4,
    lora: true,
  },
};

/** What `magrpo bench` measures without --sizes; 500m is opt-in (minutes per engine and 10–12 GB). */
export const DEFAULT_SIZES = ['1m', '10m', '124m'];

/** Seconds of each timed repetition. */
export interface Timings {
  wall: number[];
  cpu: number[];
}

/** What one child process prints for one size (ours or torch): scripts/bench_torch.py prints the same. */
export interface ChildReport {
  params: number;
  /** Full fine-tuning: every parameter trained. */
  train: Timings;
  /** Sequences per training step (TRAIN_SEQ tokens each); absent in older reports: TRAIN_BATCH. */
  train_batch?: number;
  /** LoRA training (adapters only, base frozen), when measured. */
  train_lora?: Timings;
  /** Full training with precision: bf16 (magrpo only, where the CPU has AVX-512 BF16). */
  train_bf16?: Timings;
  /** Sampling with precision: bf16 (magrpo only): bf16 weight packs for decoding (engine/packed.ts). */
  sample_bf16?: Record<string, Timings>;
  /** The adapters: rank, alpha, how many projections and trainable parameters. */
  lora?: { r: number; alpha: number; modules: number; trainable_params: number };
  sample: Record<string, Timings>;
  peak_rss_mb: number;
  /** Peak RSS so far after each phase, in the order run: sample, then lora, then full. */
  rss_mb?: Record<string, number>;
  torch_version?: string;
  settings?: Record<string, unknown>;
}

export type TrainMode = 'full' | 'lora';

/** Shapes that decide the arithmetic of one token. */
function shapes(hf: Record<string, unknown>) {
  const n = (k: string) => Number(hf[k]);
  if (hf.model_type === 'gpt2') {
    const C = n('n_embd');
    const F = Number(hf.n_inner ?? 4 * C);
    // c_attn C→3C, attn c_proj C→C, c_fc C→F, mlp c_proj F→C
    return { L: n('n_layer'), C, V: n('vocab_size'), attnWidth: C, perLayer: 4 * C * C + 2 * C * F, inPlusOut: 4 * C + 2 * C + 2 * (C + F) };
  }
  const C = n('hidden_size');
  const H = n('num_attention_heads');
  const KV = Number(hf.num_key_value_heads ?? H);
  const D = Number(hf.head_dim ?? C / H);
  const F = n('intermediate_size');
  // q, o: C↔H·D; k, v: C→KV·D; gate, up: C→F; down: F→C
  const inPlusOut = 2 * (C + H * D) + 2 * (C + KV * D) + 3 * (C + F);
  return { L: n('num_hidden_layers'), C, V: n('vocab_size'), attnWidth: H * D, perLayer: 2 * C * H * D + 2 * C * KV * D + 3 * C * F, inPlusOut };
}

/**
 * Forward FLOPs of one token at attention context `ctx`: 2 per weight of every linear layer and
 * of the LM head, plus 4·ctx per attention channel (scores and weighted values). Norms, softmax,
 * activations and sampling are left out: they are memory-bound, not what sgemm speed limits.
 */
export function forwardFlops(hf: Record<string, unknown>, ctx: number): number {
  const s = shapes(hf);
  return 2 * (s.L * s.perLayer + s.V * s.C) + 4 * s.L * s.attnWidth * ctx;
}

/** The projections LoRA adapts: every linear layer of every block (not the embeddings or the LM head). */
export function loraTargets(hf: Record<string, unknown>): string[] {
  return [...architectureOf(parseModelConfig(hf)).lora.targets];
}

/** Adapter parameters of rank r on every linear layer: r · (in + out) per projection. */
export function loraParams(hf: Record<string, unknown>, r = LORA_RANK): number {
  const s = shapes(hf);
  return r * s.L * s.inPlusOut;
}

/**
 * FLOPs per token of the benchmarked work:
 *  - train (full fine-tuning): forward + backward ≈ 3 forwards: the backward pass computes the
 *    gradients of the activations (2 per weight) and of the weights (2 per weight), and twice the
 *    attention of the forward pass.
 *  - train_lora: the frozen weights get no gradient, so with W the weights of the linear layers
 *    and LM head, A the attention FLOPs of the forward and a the adapter parameters (r·(in + out)
 *    per projection):  2W + A + 2a  forward, 2W + 2A + 2a  activation gradients (through the
 *    frozen weights and the adapters), 2a  adapter weight gradients; in all
 *      train_lora = 4W + 3A + 6a = 2 · forward + A + 6a   (forward = 2W + A, adapters excluded),
 *    about 2/3 of full fine-tuning (a is ~2% of W for rank 16 on Qwen2.5-0.5B).
 *  - sample at batch b: every forward of the prompt and of each new token, per new token.
 * The optimizer step (AdamW, elementwise) is not counted.
 */
export function flopsPerToken(hf: Record<string, unknown>): { train: number; train_lora: number; sample: number } {
  const ctx = (TRAIN_SEQ + 1) / 2;
  const fwd = forwardFlops(hf, ctx);
  const s = shapes(hf);
  const attn = 4 * s.L * s.attnWidth * ctx;
  const train = 3 * fwd;
  const trainLora = 2 * fwd + attn + 6 * loraParams(hf);
  // Sampling tokens/s counts new tokens, but the time also covers the prompt pass.
  let total = PROMPT_LEN * forwardFlops(hf, (PROMPT_LEN + 1) / 2);
  for (let i = 1; i <= NEW_TOKENS; i++) total += forwardFlops(hf, PROMPT_LEN + i);
  return { train, train_lora: trainLora, sample: total / NEW_TOKENS };
}

/** How many calls: `min`, then more while fewer than `max` ran and less than `seconds` passed. */
export interface Repeats {
  min: number;
  max: number;
  seconds: number;
}

/**
 * Timed calls per figure in a full run, for every engine alike: at least 3, then more, up to 30,
 * while less than 3 s of them ran. A 10m training step varies by ±10% from step to step on a
 * 2-CPU VM, and 3 of them (× 2 rounds) moved its median by as much; the small sizes' cheap calls
 * get 30, 124m (seconds per call) keeps 3.
 */
export const TIMED_REPEATS: Repeats = { min: 3, max: 30, seconds: 3 };

/** --quick: one timed call per figure. */
export const QUICK_REPEATS: Repeats = { min: 1, max: 1, seconds: 0 };

/** "min,max,seconds", as the peers' scripts take it (--reps, --train-warmup, --sample-warmup). */
export function repeatsArg(r: Repeats): string {
  return `${r.min},${r.max},${r.seconds}`;
}

function runs(call: () => void, r: Repeats): void {
  const start = performance.now();
  for (let i = 0; i < r.max && (i < r.min || performance.now() - start < r.seconds * 1000); i++) call();
}

/** Wall and CPU (all threads) seconds of each timed call, after untimed warm-up calls. */
export function timed(fn: () => void, reps: Repeats, warmup: Repeats = { min: 1, max: 1, seconds: 0 }): Timings {
  runs(fn, warmup);
  const out: Timings = { wall: [], cpu: [] };
  runs(() => {
    const w0 = performance.now();
    const c0 = process.cpuUsage();
    fn();
    const c = process.cpuUsage(c0);
    out.wall.push((performance.now() - w0) / 1000);
    out.cpu.push((c.user + c.system) / 1e6);
  }, reps);
  return out;
}

/**
 * One training step of the bench on `batch` × TRAIN_SEQ random tokens: forward, cross-entropy,
 * backward, AdamW, zeroed gradients. 'lora' freezes the base and attaches fresh adapters (rank
 * LORA_RANK on every linear layer) that alone are trained; 'full' trains every parameter (and
 * removes adapters a previous 'lora' call attached). `params` are the tensors AdamW updates.
 */
export function trainStep(model: CausalLM, mode: TrainMode, batch: number, rng: Rng): { step: () => void; params: Tensor[] } {
  const hf = { model_type: model.config.modelType };
  if (mode === 'lora') {
    applyLora(model, loraConfigOf(hf), rng);
  } else {
    model.lora.clear();
    for (const p of model.params.values()) p.requiresGrad = true;
  }
  const params = model.trainableParams();
  const opt = new AdamW(params, { lr: 1e-4, weightDecay: 0.01 });
  const V = model.vocabSize;
  const randomIds = (n: number) => Int32Array.from({ length: n }, () => Math.floor(rng.next() * V));
  const ids = randomIds(batch * TRAIN_SEQ);
  const targets = randomIds(batch * TRAIN_SEQ);
  // Activations are recycled from step to step, as the learner and pretraining do.
  const buffers = new BufferPool();
  const step = () =>
    buffers.use(() => {
      backward(crossEntropy(model.forward(ids, batch, TRAIN_SEQ), targets));
      opt.step();
      opt.zeroGrad();
    });
  return { step, params };
}

function loraConfigOf(hf: Record<string, unknown>): LoraConfig {
  return { r: LORA_RANK, alpha: LORA_ALPHA, targetModules: loraTargets(hf) };
}

const rssMb = () => process.resourceUsage().maxRSS / 1024;

/**
 * The worker: one model size, measured in this process. Sampling first, then LoRA training (when
 * the size asks for it or `opts.lora`), then full fine-tuning, so the peak RSS after each phase
 * tells what sampling, LoRA and full fine-tuning need (RSS peaks only grow).
 */
export function measureSize(size: string, reps: Repeats, opts: { lora?: boolean } = {}): ChildReport {
  const spec = SIZES[size];
  if (spec === undefined) throw new Error(`unknown size "${size}"`);
  setBackend('native');
  const model = createModel(parseModelConfig(spec.hf));
  const rng = new Rng(0);
  model.initialize(rng);
  const V = model.vocabSize;
  const randomIds = (n: number) => Int32Array.from({ length: n }, () => Math.floor(rng.next() * V));
  const rss: Record<string, number> = {};

  const sample: Record<string, Timings> = {};
  for (const b of SAMPLE_BATCHES) {
    const prompts = Array.from({ length: b }, () => Array.from(randomIds(PROMPT_LEN)));
    sample[b] = timed(() => generate(model, prompts, { maxNewTokens: NEW_TOKENS, temperature: 1, rng }), reps, SAMPLE_WARMUP);
  }
  rss.sample = rssMb();

  const batch = spec.trainBatch ?? TRAIN_BATCH;
  const out: Omit<ChildReport, 'train'> = { params: model.numParams(), train_batch: batch, sample, peak_rss_mb: 0, rss_mb: rss };
  if (spec.lora || opts.lora) {
    const lora = trainStep(model, 'lora', batch, rng);
    out.train_lora = timed(lora.step, reps, TRAIN_WARMUP);
    out.lora = { r: LORA_RANK, alpha: LORA_ALPHA, modules: model.lora.size, trainable_params: lora.params.reduce((n, p) => n + p.size, 0) };
    rss.lora = rssMb();
  }
  const train = timed(trainStep(model, 'full', batch, rng).step, reps, TRAIN_WARMUP);
  rss.full = rssMb();
  // precision: bf16 (docs/precision.md), where the CPU runs bf16 products natively.
  // Sampling with it everywhere (its decode products read bf16 weight packs on every ISA), last so
  // that the RSS figures above stay fp32's.
  setPrecision('bf16');
  try {
    if (nativePrecision().native) out.train_bf16 = timed(trainStep(model, 'full', batch, rng).step, reps, TRAIN_WARMUP);
    out.sample_bf16 = {};
    for (const b of SAMPLE_BATCHES) {
      const prompts = Array.from({ length: b }, () => Array.from(randomIds(PROMPT_LEN)));
      out.sample_bf16[b] = timed(() => generate(model, prompts, { maxNewTokens: NEW_TOKENS, temperature: 1, rng }), reps, SAMPLE_WARMUP);
    }
  } finally {
    setPrecision('fp32');
  }
  return { ...out, train, peak_rss_mb: rssMb() };
}
