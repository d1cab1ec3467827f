/**
 * Validation loss and perplexity, defined exactly so anyone can recompute the card's number:
 *
 *   windows  w_j = stream[o_j .. o_j + T]   (T + 1 tokens, fixed offsets o_j, fixed T)
 *   NLL      = −(1 / (J·T)) Σ_j Σ_{t<T} log p(w_j[t+1] | w_j[0..t])
 *   PPL      = exp(NLL)
 *
 * Every window is scored from position 0 with no earlier context; all J·T targets count equally.
 */
import { tokenLogprobs } from '../engine/nn.js';
import { noGrad } from '../engine/tensor.js';
import type { CausalLM } from '../model/transformer.js';
import { windowsAt } from './dataset.js';

export interface NllResult {
  /** Mean negative log-likelihood per target token, in nats. */
  meanNll: number;
  /** Targets scored (windows × seqLen). */
  tokens: number;
}

/** Mean token NLL of `model` over the windows at `offsets`, evaluated `batchSize` windows at a time. */
export function meanTokenNll(model: CausalLM, stream: Uint16Array, offsets: readonly number[], seqLen: number, batchSize: number): NllResult {
  let sum = 0;
  let tokens = 0;
  noGrad(() => {
    for (let i = 0; i < offsets.length; i += batchSize) {
      const batch = windowsAt(stream, offsets.slice(i, i + batchSize), seqLen);
      const lp = tokenLogprobs(model.forward(batch.ids, batch.batch, seqLen), batch.targets); // [B, T]
      for (const v of lp.data) sum -= v;
      tokens += lp.size;
    }
  });
  return { meanNll: sum / tokens, tokens };
}
