/**
 * The models `magrpo bench` runs, what each costs in FLOPs per token, and the measurement of one
 * size in a worker process (training tokens/s, sampling tokens/s at each batch, peak RSS).
 */
import { crossEntropy } from '../engine/nn.js';
import { AdamW } from '../engine/optim.js';
import { Rng } from '../engine/rng.js';
import { setBackend } from '../engine/runtime.js';
import { backward } from '../engine/tensor.js';
import { parseModelConfig } from '../model/config.js';
import { createModel } from '../model/load.js';
import { generate } from '../model/sample.js';

export const TRAIN_BATCH = 8;
export const TRAIN_SEQ = 128;
export const SAMPLE_BATCHES = [8, 32];
/**
 * Untimed training steps first, at least 2 and then up to 5 within 5 s: the first steps also
 * allocate optimizer state, grow the heap and let the JIT settle; a real run takes thousands.
 */
export const TRAIN_WARMUP = { min: 2, max: 5, seconds: 5 };
export const PROMPT_LEN = 16;
export const NEW_TOKENS = 64;

/** The benchmarked models, as the HF config.json each would have. */
export const SIZES: Record<string, { label: string; hf: Record<string, unknown> }> = {
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
};

/** Seconds of each timed repetition. */
export interface Timings {
  wall: number[];
  cpu: number[];
}

/** What one child process prints for one size (ours or torch): scripts/bench_torch.py prints the same. */
export interface ChildReport {
  params: number;
  train: Timings;
  sample: Record<string, Timings>;
  peak_rss_mb: number;
  torch_version?: string;
  settings?: Record<string, unknown>;
}

/** Shapes that decide the arithmetic of one token. */
function shapes(hf: Record<string, unknown>) {
  const n = (k: string) => Number(hf[k]);
  if (hf.model_type === 'gpt2') {
    const C = n('n_embd');
    const F = Number(hf.n_inner ?? 4 * C);
    return { L: n('n_layer'), C, V: n('vocab_size'), attnWidth: C, perLayer: 4 * C * C + 2 * C * F };
  }
  const C = n('hidden_size');
  const H = n('num_attention_heads');
  const KV = Number(hf.num_key_value_heads ?? H);
  const D = Number(hf.head_dim ?? C / H);
  const F = n('intermediate_size');
  return { L: n('num_hidden_layers'), C, V: n('vocab_size'), attnWidth: H * D, perLayer: 2 * C * H * D + 2 * C * KV * D + 3 * C * F };
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

/** FLOPs per token of the benchmarked work: training (forward + backward ≈ 3 forwards) and sampling at batch b. */
export function flopsPerToken(hf: Record<string, unknown>): { train: number; sample: number } {
  const train = 3 * forwardFlops(hf, (TRAIN_SEQ + 1) / 2);
  // Sampling tokens/s counts new tokens, but the time also covers the prompt pass.
  let total = PROMPT_LEN * forwardFlops(hf, (PROMPT_LEN + 1) / 2);
  for (let i = 1; i <= NEW_TOKENS; i++) total += forwardFlops(hf, PROMPT_LEN + i);
  return { train, sample: total / NEW_TOKENS };
}

/**
 * Wall and CPU (all threads) seconds of each of `reps` calls, after untimed warm-up calls: `min`
 * of them, then more while fewer than `max` ran and less than `seconds` passed.
 */
export function timed(fn: () => void, reps: number, warmup = { min: 1, max: 1, seconds: 0 }): Timings {
  const start = performance.now();
  for (let i = 0; i < warmup.max && (i < warmup.min || performance.now() - start < warmup.seconds * 1000); i++) fn();
  const out: Timings = { wall: [], cpu: [] };
  for (let i = 0; i < reps; i++) {
    const w0 = performance.now();
    const c0 = process.cpuUsage();
    fn();
    const c = process.cpuUsage(c0);
    out.wall.push((performance.now() - w0) / 1000);
    out.cpu.push((c.user + c.system) / 1e6);
  }
  return out;
}

/** The worker: one model size, measured in this process. */
export function measureSize(size: string, reps: number): ChildReport {
  const spec = SIZES[size];
  if (spec === undefined) throw new Error(`unknown size "${size}"`);
  setBackend('native');
  const model = createModel(parseModelConfig(spec.hf));
  const rng = new Rng(0);
  model.initialize(rng);
  const V = model.vocabSize;
  const randomIds = (n: number) => Int32Array.from({ length: n }, () => Math.floor(rng.next() * V));

  const opt = new AdamW(model.trainableParams(), { lr: 1e-4, weightDecay: 0.01 });
  const ids = randomIds(TRAIN_BATCH * TRAIN_SEQ);
  const targets = randomIds(TRAIN_BATCH * TRAIN_SEQ);
  const train = timed(
    () => {
      backward(crossEntropy(model.forward(ids, TRAIN_BATCH, TRAIN_SEQ), targets));
      opt.step();
      opt.zeroGrad();
    },
    reps,
    TRAIN_WARMUP,
  );

  const sample: Record<string, Timings> = {};
  for (const b of SAMPLE_BATCHES) {
    const prompts = Array.from({ length: b }, () => Array.from(randomIds(PROMPT_LEN)));
    sample[b] = timed(() => generate(model, prompts, { maxNewTokens: NEW_TOKENS, temperature: 1, rng }), reps);
  }
  return { params: model.numParams(), train, sample, peak_rss_mb: process.resourceUsage().maxRSS / 1024 };
}
