/**
 * log π(completion | prompt) for a batch of (prompt, completion) pairs, with gradients.
 *
 * Sequences are right-padded to one length T; the logits are produced only at the rows that
 * predict a completion token (row t predicts token t+1), so the LM head never runs on prompts.
 * Every real completion token is scored, including the last; padding is never scored.
 */
import { scratch } from '../engine/buffer-pool.js';
import { entropyRows, tokenLogprobs } from '../engine/nn.js';
import { isGradEnabled, Tensor } from '../engine/tensor.js';
import type { CausalLM } from './transformer.js';

export interface Completion {
  readonly prompt: readonly number[];
  readonly completion: readonly number[];
}

export interface CompletionLogprobs {
  /** [R] log-prob of every completion token, sequences concatenated in order. */
  tokenLogprobs: Tensor;
  /** [R] index of the sequence each token belongs to. */
  sequenceOf: Int32Array;
  /** Completion length of each sequence. */
  lengths: number[];
  /** [R] entropy of the predictive distribution at each token (a metric; no gradient). */
  entropy?: Float64Array;
}

/** Forward + token log-probs of every completion token. Empty completions contribute nothing. */
export function completionLogprobs(model: CausalLM, batch: readonly Completion[], opts: { entropy?: boolean } = {}): CompletionLogprobs {
  const B = batch.length;
  const T = Math.max(...batch.map((s) => s.prompt.length + s.completion.length));
  if (T > model.maxPositions) throw new Error(`a prompt + completion of ${T} tokens exceeds the model's context of ${model.maxPositions}`);
  const ids = new Int32Array(B * T);
  const mask = new Uint8Array(B * T);
  const rows: number[] = [];
  const targets: number[] = [];
  const sequenceOf: number[] = [];
  for (const [b, s] of batch.entries()) {
    if (s.prompt.length === 0) throw new Error(`sequence ${b} has an empty prompt: nothing predicts its first token`);
    const seq = [...s.prompt, ...s.completion];
    for (let t = 0; t < T; t++) {
      ids[b * T + t] = t < seq.length ? seq[t] : seq[seq.length - 1];
      mask[b * T + t] = t < seq.length ? 1 : 0;
    }
    for (let j = 0; j < s.completion.length; j++) {
      rows.push(b * T + s.prompt.length - 1 + j); // predicts completion[j]
      targets.push(s.completion[j]);
      sequenceOf.push(b);
    }
  }
  const lengths = batch.map((s) => s.completion.length);
  if (rows.length === 0) {
    return { tokenLogprobs: new Tensor(new Float32Array(0), [0]), sequenceOf: new Int32Array(0), lengths };
  }
  const { lp, entropy } = logprobsOf(() => model.forward(ids, B, T, { keyMask: mask, outputRows: Int32Array.from(rows) }), targets, opts.entropy); // logits [R, V]
  return { tokenLogprobs: lp, sequenceOf: Int32Array.from(sequenceOf), lengths, entropy };
}

/**
 * Token log-probs (and entropies) from the logits `forward` makes. Without gradients the logits
 * and every activation behind them go back to the buffer pool at once (engine/buffer-pool.ts,
 * scratch): only the log-probs leave.
 */
function logprobsOf(forward: () => Tensor, targets: readonly number[], entropy?: boolean): { lp: Tensor; entropy?: Float64Array } {
  const score = () => {
    const logits = forward();
    return { lp: tokenLogprobs(logits, Int32Array.from(targets)), entropy: entropy ? entropyRows(logits) : undefined };
  };
  return isGradEnabled() ? score() : scratch(score, (r) => [r.lp.data]); // entropies are plain Float64Arrays
}

/** Per-sequence sums of token log-probs (plain numbers; no gradient). */
export function sequenceSums(r: CompletionLogprobs): number[] {
  const out = new Array<number>(r.lengths.length).fill(0);
  for (let i = 0; i < r.sequenceOf.length; i++) out[r.sequenceOf[i]] += r.tokenLogprobs.data[i];
  return out;
}

/**
 * `completionLogprobs` of completions that all follow one prompt, the prompt computed once: one
 * packed sequence of the prompt and the scored completions (each padded to the longest),
 * attending as `ForwardOptions.sharedPrompt` says. With gradients (the learner's loss) or inside
 * noGrad (reference and rescoring). The prompt's last row predicts every
 * first token, so the gradient through it is the sum of the completions' gradients, as in the
 * unshared batch. Same tokens, order and `sequenceOf` as `completionLogprobs` on the batch
 * [(prompt, c) for c in completions]; values equal to float rounding.
 */
export function groupLogprobs(
  model: CausalLM,
  prompt: readonly number[],
  completions: readonly (readonly number[])[],
  opts: { entropy?: boolean } = {},
): CompletionLogprobs {
  if (prompt.length === 0) throw new Error('the prompt is empty: nothing predicts the first completion token');
  const lengths = completions.map((c) => c.length);
  const scored = completions.flatMap((c, b) => (c.length > 0 ? [b] : []));
  const P = prompt.length;
  const L = Math.max(0, ...lengths);
  if (P + L > model.maxPositions) throw new Error(`a prompt + completion of ${P + L} tokens exceeds the model's context of ${model.maxPositions}`);
  if (scored.length === 0) return { tokenLogprobs: new Tensor(new Float32Array(0), [0]), sequenceOf: new Int32Array(0), lengths };
  // Each continuation holds its completion but the last token (the last predicts nothing).
  const S = scored.length;
  const T = L - 1;
  const N = P + S * T;
  const ids = new Int32Array(N);
  const positions = new Int32Array(N);
  const keyMask = new Uint8Array(S * T);
  ids.set(prompt);
  for (let t = 0; t < P; t++) positions[t] = t;
  const rows: number[] = [];
  const targets: number[] = [];
  const sequenceOf: number[] = [];
  for (const [s, b] of scored.entries()) {
    const c = completions[b];
    for (let j = 0; j < T; j++) {
      ids[P + s * T + j] = c[Math.min(j, c.length - 1)];
      positions[P + s * T + j] = P + j;
      keyMask[s * T + j] = j < c.length - 1 ? 1 : 0;
    }
    for (let j = 0; j < c.length; j++) {
      rows.push(j === 0 ? P - 1 : P + s * T + j - 1);
      targets.push(c[j]);
      sequenceOf.push(b);
    }
  }
  const sharedPrompt = { promptLen: P, branches: S, keyMask };
  const { lp, entropy } = logprobsOf(() => model.forward(ids, 1, N, { positions, sharedPrompt, outputRows: Int32Array.from(rows) }), targets, opts.entropy);
  return { tokenLogprobs: lp, sequenceOf: Int32Array.from(sequenceOf), lengths, entropy };
}
