/**
 * The pretraining loop (nanoGPT-style, flat): sample windows, forward, cross-entropy, backward
 * with gradient accumulation, clip, AdamW at the scheduled rate; validation loss on fixed windows,
 * resumable checkpoints, metrics.jsonl and a loss plot (redrawn at each checkpoint) along the way.
 *
 *   lr(s)  = peak · lrMultiplier(s)   linear warmup to the peak, cosine decay to min_lr_ratio · peak
 *   g      = (1/A) Σ_a ∇ CE(window batch a)           A = grad_accum_steps
 *   decay  weight_decay on every matrix (projections and the tied embedding / LM head), none on
 *          RMSNorm weights — the nanoGPT split (decay ⇔ rank ≥ 2).
 *
 * Determinism: one seed drives initialisation and window sampling; a checkpoint stores weights,
 * AdamW moments and the sampling RNG, so a resumed run repeats the uninterrupted run's losses bit
 * for bit (validation and checkpoints consume no randomness).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BufferPool } from '../engine/buffer-pool.js';
import { crossEntropy } from '../engine/nn.js';
import { AdamW, clipGradNorm, gradNorm, lrMultiplier } from '../engine/optim.js';
import { Rng } from '../engine/rng.js';
import { resolvePrecision, setPrecision } from '../engine/runtime.js';
import { backward } from '../engine/tensor.js';
import type { LlamaConfig } from '../model/config.js';
import { parseModelConfig } from '../model/hf-config.js';
import { createModel, loadModel } from '../model/load.js';
import { TextTokenizer } from '../model/tokenizer.js';
import type { CausalLM } from '../model/transformer.js';
import { latestCheckpoint, loadCheckpoint, PRETRAIN_CHECKPOINT_VERSION, type PretrainState, saveCheckpoint } from './checkpoint.js';
import { type PretrainConfig, PretrainConfigError } from './config.js';
import { fixedWindowOffsets, loadTokenStream, randomWindows, type TokenStreamStamp } from './dataset.js';
import { meanTokenNll } from './evaluate.js';
import { MetricsLog, plotLoss } from './metrics.js';
import { createProgress, defaultProgressMode, type ProgressMode } from './progress.js';

export interface PretrainOptions {
  /** Continue from the run's latest checkpoint (an error if the run has none). */
  resume?: boolean;
  progress?: ProgressMode;
  /** Asked after every step; true saves a checkpoint and returns early (resume later). */
  shouldStop?: (step: number) => boolean;
}

/** What training produced, for export and tests. */
export interface PretrainResult {
  model: CausalLM;
  tokenizer: TextTokenizer;
  state: PretrainState;
  /** Reached max_steps (false when `shouldStop` ended it). */
  completed: boolean;
  /** Per-step training losses of this session, in order (index 0 = first step run now). */
  losses: number[];
  data: PretrainData;
}

export interface PretrainData {
  train: Uint16Array;
  validation: Uint16Array;
  trainStamp: TokenStreamStamp;
  validationStamp: TokenStreamStamp;
  /** Fixed offsets of the validation windows (context_length + 1 tokens each). */
  validationOffsets: number[];
}

/** The HF Llama config of the model a pretraining config describes. */
export function modelConfigFor(c: PretrainConfig, tokenizer: TextTokenizer): LlamaConfig {
  const m = c.model;
  return parseModelConfig({
    architectures: ['LlamaForCausalLM'],
    model_type: 'llama',
    vocab_size: tokenizer.vocabSize,
    hidden_size: m.hidden_size,
    intermediate_size: m.intermediate_size,
    num_hidden_layers: m.num_layers,
    num_attention_heads: m.num_heads,
    num_key_value_heads: m.num_kv_heads ?? m.num_heads,
    head_dim: m.hidden_size / m.num_heads,
    max_position_embeddings: m.context_length,
    rms_norm_eps: m.rms_norm_eps,
    rope_theta: m.rope_theta,
    tie_word_embeddings: m.tie_word_embeddings,
    attention_bias: false,
    mlp_bias: false,
    bos_token_id: tokenizer.bosId,
    eos_token_id: tokenizer.eosId,
    pad_token_id: tokenizer.padId,
    torch_dtype: 'float32',
  }) as LlamaConfig;
}

/** Tokenizes (or reads the cache of) both splits and fixes the validation windows. */
export function prepareData(c: PretrainConfig, tokenizer: TextTokenizer): PretrainData {
  const tokFile = join(c.data.tokenizer, 'tokenizer.json');
  const cache = join(c.run_dir, 'tokens');
  const train = loadTokenStream(c.data.train, tokenizer, tokFile, cache, 'train', c.data.max_train_docs);
  const validation = loadTokenStream(c.data.validation, tokenizer, tokFile, cache, 'validation');
  return {
    train: train.tokens,
    validation: validation.tokens,
    trainStamp: train.stamp,
    validationStamp: validation.stamp,
    validationOffsets: fixedWindowOffsets(validation.tokens.length, c.eval.num_windows, c.model.context_length),
  };
}

/** Config sections that shape the training curve: a resumed run must not change them. */
const CURVE_KEYS = ['seed', 'data', 'model', 'train'] as const;

function checkResumable(c: PretrainConfig, file: string): void {
  const saved = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  const issues = CURVE_KEYS.filter((k) => JSON.stringify(saved[k]) !== JSON.stringify(c[k])).map((k) => ({
    path: k,
    message: `differs from the run being resumed (${file}); start a new run_dir to change it`,
  }));
  if (issues.length > 0) throw new PretrainConfigError(file, issues);
}

/**
 * One optimizer step: gradients of grad_accum_steps micro-batches averaged (each backward seeded
 * with 1/A), clipped, then AdamW at rate `lr`. Returns the mean loss and the norm before clipping.
 */
function trainStep(model: CausalLM, optimizer: AdamW, c: PretrainConfig, train: Uint16Array, rng: Rng, lr: number): { loss: number; norm: number } {
  const A = c.train.grad_accum_steps;
  const T = c.model.context_length;
  let loss = 0;
  for (let a = 0; a < A; a++) {
    const batch = randomWindows(train, c.train.micro_batch_size, T, rng);
    const ce = crossEntropy(model.forward(batch.ids, batch.batch, T), batch.targets);
    backward(ce, 1 / A);
    loss += ce.item() / A;
  }
  const params = optimizer.params;
  const norm = c.train.grad_clip === null ? gradNorm(params) : clipGradNorm(params, c.train.grad_clip);
  optimizer.lr = lr;
  optimizer.step();
  optimizer.zeroGrad();
  return { loss, norm };
}

/**
 * Continued pretraining: copies a model folder's weights into the freshly built model. The folder's
 * architecture must be the config's `model` (same parameter names and shapes); the optimiser starts
 * fresh. Initialisation still consumes its random numbers first, so window sampling is unchanged.
 */
function initializeFrom(model: CausalLM, dir: string): void {
  let source: CausalLM;
  try {
    source = loadModel(dir);
  } catch (e) {
    throw new PretrainConfigError(dir, [{ path: 'init_from', message: (e as Error).message }]);
  }
  const from = source.params;
  for (const [name, p] of model.params) {
    const q = from.get(name);
    if (q === undefined || q.shape.join() !== p.shape.join()) {
      const got = q === undefined ? 'missing' : `[${q.shape}]`;
      throw new PretrainConfigError(dir, [
        { path: 'init_from', message: `parameter "${name}" is [${p.shape}] in the config's model but ${got} in ${dir}: the architectures differ` },
      ]);
    }
    p.data.set(q.data);
  }
}

/** Runs (or resumes) pretraining to `train.max_steps`, checkpointing along the way. */
export async function pretrain(c: PretrainConfig, opts: PretrainOptions = {}): Promise<PretrainResult> {
  const tokenizer = TextTokenizer.fromDir(c.data.tokenizer);
  setPrecision(resolvePrecision(c.precision));
  mkdirSync(c.run_dir, { recursive: true });
  const data = prepareData(c, tokenizer);
  const T = c.model.context_length;
  const tokensPerStep = c.train.micro_batch_size * c.train.grad_accum_steps * T;

  const root = new Rng(c.seed);
  const initRng = root.fork();
  const dataRng = root.fork();
  const model = createModel(modelConfigFor(c, tokenizer));
  model.initialize(initRng);
  if (c.init_from !== null) initializeFrom(model, c.init_from);
  const optimizer = new AdamW(model.trainableParams(), {
    lr: c.train.learning_rate,
    betas: [c.train.beta1, c.train.beta2],
    eps: 1e-8,
    weightDecay: c.train.weight_decay,
    decay: (p) => p.shape.length >= 2,
  });

  const configFile = join(c.run_dir, 'run_config.json');
  const metrics = new MetricsLog(c.run_dir);
  let state: PretrainState = { version: PRETRAIN_CHECKPOINT_VERSION, step: 0, tokens: 0, elapsed_s: 0, data_rng: dataRng.getState(), val_loss: null };
  const latest = latestCheckpoint(c.run_dir);
  if (opts.resume) {
    if (latest === null) throw new PretrainConfigError(c.run_dir, [{ path: 'run_dir', message: 'has no checkpoint to resume from; run without --resume' }]);
    checkResumable(c, configFile);
    state = loadCheckpoint(latest, model, optimizer);
    dataRng.setState(state.data_rng);
    metrics.resetTo(state.step);
  } else {
    if (latest !== null)
      throw new PretrainConfigError(c.run_dir, [{ path: 'run_dir', message: `already holds a run (${latest}); pass --resume or choose a new run_dir` }]);
    metrics.resetTo(0);
  }
  writeFileSync(configFile, `${JSON.stringify(c, null, 2)}\n`);

  const maxSteps = c.train.max_steps;
  const progress = createProgress(opts.progress ?? defaultProgressMode(), state.step, maxSteps, c.log_every, tokensPerStep);
  const losses: number[] = [];
  const sessionStart = performance.now();
  const elapsedBefore = state.elapsed_s;
  let trainSeconds = 0;
  let sessionTokens = 0;
  let stopped = false;
  const buffers = new BufferPool(); // activations recycled from step to step

  const validate = () => {
    const { meanNll } = meanTokenNll(model, data.validation, data.validationOffsets, T, c.train.micro_batch_size);
    state.val_loss = meanNll;
    return meanNll;
  };
  const checkpoint = () => {
    state.data_rng = dataRng.getState();
    state.elapsed_s = elapsedBefore + (performance.now() - sessionStart) / 1000;
    saveCheckpoint(c.run_dir, model, optimizer, state, c.checkpoint.keep);
  };

  try {
    while (state.step < maxSteps && !stopped) {
      const t0 = performance.now();
      const lr =
        c.train.learning_rate *
        lrMultiplier(state.step, { kind: 'cosine', warmupSteps: c.train.warmup_steps, totalSteps: maxSteps, minRatio: c.train.min_lr_ratio });
      const { loss, norm } = buffers.use(() => trainStep(model, optimizer, c, data.train, dataRng, lr));
      state.step += 1;
      state.tokens += tokensPerStep;
      losses.push(loss);
      trainSeconds += (performance.now() - t0) / 1000;
      sessionTokens += tokensPerStep;
      const tokensPerSecond = sessionTokens / trainSeconds;
      const elapsed = elapsedBefore + (performance.now() - sessionStart) / 1000;
      metrics.append({
        step: state.step,
        'train/loss': loss,
        'train/lr': lr,
        'train/grad_norm': norm,
        'train/tokens': state.tokens,
        'perf/tokens_per_s': tokensPerSecond,
        'time/elapsed_s': elapsed,
      });

      const last = state.step === maxSteps;
      if (state.step % c.eval.every_steps === 0 || last) {
        const val = validate();
        metrics.append({ step: state.step, 'val/loss': val, 'val/perplexity': Math.exp(val) });
        progress.note(`step ${state.step}: validation loss ${val.toFixed(4)} (perplexity ${Math.exp(val).toFixed(2)})`);
      }
      stopped = opts.shouldStop?.(state.step) ?? false;
      if (state.step % c.checkpoint.every_steps === 0 || last || stopped) {
        checkpoint();
        await plotLoss(metrics.read(), c.run_dir, `pretraining loss (${c.run_dir})`);
        progress.note(`step ${state.step}: checkpoint saved`);
      }
      progress.update({ step: state.step, loss, valLoss: state.val_loss, lr, tokensPerSecond });
      // Let timers and signal handlers run: the progress bar redraws, Ctrl-C reaches shouldStop.
      await new Promise((resolve) => setImmediate(resolve));
    }
  } finally {
    progress.stop();
  }
  return { model, tokenizer, state, completed: state.step >= maxSteps, losses, data };
}

/** The latest checkpoint of a run as a model (no optimizer), with its data: what export needs. */
export function openRun(c: PretrainConfig): Omit<PretrainResult, 'losses'> {
  const dir = latestCheckpoint(c.run_dir);
  if (dir === null) throw new PretrainConfigError(c.run_dir, [{ path: 'run_dir', message: 'has no checkpoint to export' }]);
  const tokenizer = TextTokenizer.fromDir(c.data.tokenizer);
  const model = createModel(modelConfigFor(c, tokenizer));
  const state = loadCheckpoint(dir, model, null);
  return { model, tokenizer, state, completed: state.step >= c.train.max_steps, data: prepareData(c, tokenizer) };
}
