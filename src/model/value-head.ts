/**
 * A scalar value head on a CausalLM: v = w · h + b, h the final hidden state (after the final
 * norm) at the last position of a token sequence, w [1, C], b [1]. TRL's
 * `AutoModelForCausalLMWithValueHead` (`v_head.summary`, an nn.Linear(C, 1)) and CoMLRL's
 * `CausalLMWithValueHead` (`value_projection`, its default without a hidden layer) are this head.
 *
 * Saved as `value_head.safetensors` beside the model or adapter it belongs to, tensors named as
 * TRL's state dict has them (`v_head.summary.weight` [1, C], `v_head.summary.bias` [1], F32).
 * TRL reads the head from the folder's model.safetensors / pytorch_model.bin instead; CoMLRL
 * writes `value_head.pt` with `value_projection.*` names (docs/differences.md).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { linear, reshape } from '../engine/ops.js';
import type { Rng } from '../engine/rng.js';
import { allocPersistent } from '../engine/runtime.js';
import { noGrad, Tensor } from '../engine/tensor.js';
import { readSafetensors, writeSafetensors } from './safetensors.js';
import type { CausalLM } from './transformer.js';

export const VALUE_HEAD_FILE = 'value_head.safetensors';
export const VALUE_HEAD_WEIGHT = 'v_head.summary.weight';
export const VALUE_HEAD_BIAS = 'v_head.summary.bias';

export class ValueHead {
  /** [1, C] */
  readonly weight: Tensor;
  /** [1] */
  readonly bias: Tensor;

  /** A head on hidden states of width `hidden`: w ~ N(0, 0.02²), b = 0 (CoMLRL's initialisation). */
  constructor(
    readonly hidden: number,
    rng: Rng,
  ) {
    this.weight = new Tensor(allocPersistent(hidden), [1, hidden], true, VALUE_HEAD_WEIGHT);
    this.bias = new Tensor(allocPersistent(1), [1], true, VALUE_HEAD_BIAS);
    for (let i = 0; i < hidden; i++) this.weight.data[i] = rng.normal() * 0.02;
  }

  params(): Tensor[] {
    return [this.weight, this.bias];
  }

  /** [1] the value of `ids` (differentiable through the head and the model's trainable weights). */
  value(model: CausalLM, ids: readonly number[]): Tensor {
    if (ids.length === 0) throw new Error('value head: an empty sequence has no last hidden state');
    if (model.config.hiddenSize !== this.hidden) throw new Error(`value head of width ${this.hidden} on a model of hidden size ${model.config.hiddenSize}`);
    const h = model.forward(Int32Array.from(ids), 1, ids.length, { outputRows: Int32Array.of(ids.length - 1), output: 'hidden' }); // [1, C]
    return reshape(linear(h, this.weight, this.bias), [1]);
  }

  /** Writes `dir`/value_head.safetensors. */
  save(dir: string): void {
    writeSafetensors(join(dir, VALUE_HEAD_FILE), {
      [VALUE_HEAD_WEIGHT]: { dtype: 'F32', shape: [1, this.hidden], data: Float32Array.from(this.weight.data) },
      [VALUE_HEAD_BIAS]: { dtype: 'F32', shape: [1], data: Float32Array.from(this.bias.data) },
    });
  }

  /** Reads what `save` wrote into this head's tensors (in place: an optimizer over them stays valid). */
  load(dir: string): void {
    const file = join(dir, VALUE_HEAD_FILE);
    if (!existsSync(file)) throw new Error(`${dir}: no ${VALUE_HEAD_FILE} (the value head of an actor-critic run)`);
    const t = readSafetensors(file);
    const w = t.get(VALUE_HEAD_WEIGHT);
    const b = t.get(VALUE_HEAD_BIAS);
    if (!w || !b) throw new Error(`${file}: needs ${VALUE_HEAD_WEIGHT} and ${VALUE_HEAD_BIAS}`);
    if (w.data.length !== this.hidden || b.data.length !== 1)
      throw new Error(`${file}: a head of width ${w.data.length}, this model's hidden size is ${this.hidden}`);
    noGrad(() => {
      this.weight.data.set(w.data);
      this.bias.data.set(b.data);
    });
  }
}
