/**
 * After training: write the Hugging Face model folder (config.json, generation_config.json,
 * model.safetensors, tokenizer files), then measure the shipped weights — validation perplexity on
 * the fixed windows, prose and code samples, and the held-out Python parse/pass shares — and write
 * eval.json, README.md (the model card) and the loss plot beside them.
 */
import { copyFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { readJsonlGz } from '../data/build-corpus.js';
import { cpuInfo, isaSummary } from '../engine/cpu.js';
import { backend } from '../engine/runtime.js';
import { writeFileAtomic } from '../model/atomic-write.js';
import { saveModel } from '../model/load.js';
import { LanguageModel } from '../model/pretrained.js';
import type { TextTokenizer } from '../model/tokenizer.js';
import type { CausalLM } from '../model/transformer.js';
import { meanTextFluency } from '../text/fluency-measures.js';
import type { PretrainState } from './checkpoint.js';
import { CODE_STOP_STRINGS, type CodeEvalResult, evaluateCode } from './code-eval.js';
import type { PretrainConfig } from './config.js';
import { sha256File } from './dataset.js';
import { meanTokenNll } from './evaluate.js';
import { MetricsLog, plotLoss, series } from './metrics.js';
import { type CorpusSource, type EvalJson, renderModelCard, type Sample } from './model-card.js';
import type { PretrainData } from './train.js';

export const EVAL_VERSION = 1;

export const PERPLEXITY_DEFINITION =
  'exp(mean token NLL): the validation split is tokenized as BOS doc EOS BOS doc EOS … (tokenizer.json of this folder, ' +
  'no post-processor tokens), windows of window_tokens tokens start at `offsets`; each window is scored from its first ' +
  'token with no earlier context, and the NLL of its window_tokens − 1 next-token targets is averaged over all windows.';

export const PROSE_PROMPTS = ['Call me Ishmael. Some years ago', 'The President said that the nation', 'In the morning the ship'] as const;
const PROSE_SAMPLING = { temperature: 0.8, topP: 0.95, maxNewTokens: 60 } as const;

export interface ExportInput {
  config: PretrainConfig;
  configFile: string;
  model: CausalLM;
  tokenizer: TextTokenizer;
  state: PretrainState;
  data: PretrainData;
}

export interface ExportOptions {
  /** Log lines (progress of the slow parts). */
  log?: (line: string) => void;
}

const FINAL_LOSS_STEPS = 20;

export function nonEmbeddingParams(model: CausalLM): number {
  let n = 0;
  for (const [name, p] of model.params) if (!name.includes('embed_tokens') && name !== 'lm_head.weight') n += p.size;
  return n;
}

/** Writes the model folder with its card and returns what went into eval.json. */
export async function exportModel(input: ExportInput, opts: ExportOptions = {}): Promise<EvalJson> {
  const { config: c, state, data } = input;
  const log = opts.log ?? (() => {});
  const dir = c.export.dir;
  mkdirSync(dir, { recursive: true });
  saveModel(input.model, dir, c.export.dtype);
  input.tokenizer.saveTo(dir);
  const tok = input.tokenizer;
  const generation = {
    bos_token_id: tok.bosId,
    eos_token_id: tok.eosId,
    pad_token_id: tok.padId,
    do_sample: true,
    temperature: PROSE_SAMPLING.temperature,
    top_p: PROSE_SAMPLING.topP,
    max_new_tokens: c.export.max_new_tokens,
  };
  writeFileAtomic(join(dir, 'generation_config.json'), [`${JSON.stringify(generation, null, 2)}\n`]);

  // Everything below measures the shipped (rounded) weights, as a user will load them.
  const lm = LanguageModel.load(dir);
  const T = c.model.context_length;
  log('export: validation perplexity of the shipped weights');
  const nll = meanTokenNll(lm.model, data.validation, data.validationOffsets, T, c.train.micro_batch_size);
  const entries = new MetricsLog(c.run_dir).read();
  const trainLosses = series(entries, 'train/loss').slice(-FINAL_LOSS_STEPS);
  const vals = series(entries, 'val/loss').filter(([s]) => s === state.step);

  const trainDocs = readJsonlGz(c.data.train);
  const trainText = trainDocs.map((d) => d.text).join('\n');
  const bySource = new Map<string, CorpusSource>();
  for (const d of trainDocs) {
    const s = bySource.get(d.source) ?? { source: d.source, docs: 0, chars: 0 };
    s.docs++;
    s.chars += d.text.length;
    bySource.set(d.source, s);
  }
  let code: CodeEvalResult | null = null;
  if (c.export.code_eval_tasks > 0) {
    log(`export: ${c.export.code_eval_tasks} held-out Python completions`);
    code = await evaluateCode(lm, trainText, {
      count: c.export.code_eval_tasks,
      seed: c.export.code_eval_seed,
      maxNewTokens: c.export.max_new_tokens,
      temperature: c.export.temperature,
    });
  }
  log('export: samples');
  const samples = sampleTexts(lm, code, c);
  const fluencySamples = proseForFluency(lm, c);
  const cpu = cpuInfo();

  const tokensPerStep = c.train.micro_batch_size * c.train.grad_accum_steps * T;
  const evalJson: EvalJson = {
    version: EVAL_VERSION,
    model: { parameters: lm.model.numParams(), non_embedding_parameters: nonEmbeddingParams(lm.model), dtype: c.export.dtype },
    training: {
      completed: state.step >= c.train.max_steps,
      steps: state.step,
      max_steps: c.train.max_steps,
      tokens: state.tokens,
      tokens_per_step: tokensPerStep,
      epochs: state.tokens / data.train.length,
      wall_time_s: state.elapsed_s,
      final_train_loss: trainLosses.length > 0 ? trainLosses.reduce((s, [, v]) => s + v, 0) / trainLosses.length : null,
      final_train_loss_steps: trainLosses.length,
      final_val_loss_f32: vals.length > 0 ? vals[vals.length - 1][1] : null,
    },
    perplexity: {
      definition: PERPLEXITY_DEFINITION,
      split: c.data.validation,
      corpus_sha256: data.validationStamp.corpus_sha256,
      tokenizer_sha256: data.validationStamp.tokenizer_sha256,
      stream_tokens: data.validation.length,
      window_tokens: T + 1,
      offsets: data.validationOffsets,
      targets: nll.tokens,
      mean_nll: nll.meanNll,
      perplexity: Math.exp(nll.meanNll),
    },
    code: code === null ? null : withoutCompletions(code),
    prose_fluency: { samples: fluencySamples.length, ...meanTextFluency(fluencySamples) },
    machine: { cpu: cpu.modelName, isa: isaSummary(cpu), threads: backend().getNumThreads(), backend: backend().name },
  };
  writeFileAtomic(join(dir, 'eval.json'), [`${JSON.stringify(evalJson, null, 2)}\n`]);
  if (code !== null)
    writeFileAtomic(
      join(dir, 'code_completions.jsonl'),
      code.completions.map((r) => `${JSON.stringify(r)}\n`),
    );

  await plotLoss(entries, c.run_dir, `pretraining loss (${relative('.', dir) || dir})`);
  for (const f of ['loss.svg', 'loss.png']) if (existsSync(join(c.run_dir, f))) copyFileSync(join(c.run_dir, f), join(dir, f));

  const card = renderModelCard({
    config: c,
    configFile: input.configFile,
    eval: evalJson,
    modelConfig: JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>,
    trainStamp: data.trainStamp,
    trainCorpusSha256: sha256File(c.data.train),
    samples,
    valCurve: series(entries, 'val/loss'),
    proseSampling: PROSE_SAMPLING,
    codeStops: CODE_STOP_STRINGS,
    sources: [...bySource.values()],
  });
  writeFileAtomic(join(dir, 'README.md'), [card]);
  return evalJson;
}

function withoutCompletions(r: CodeEvalResult): Omit<CodeEvalResult, 'completions'> {
  const { completions: _, ...rest } = r;
  return rest;
}

/** Prose samples plus the first two held-out code completions (already sampled). */
function sampleTexts(lm: LanguageModel, code: CodeEvalResult | null, c: PretrainConfig): { prose: Sample[]; code: Sample[] } {
  const bos = lm.tokenizer.bosId === null ? '' : lm.tokenizer.decode([lm.tokenizer.bosId]);
  const out = lm.sample(
    PROSE_PROMPTS.map((p) => bos + p),
    { ...PROSE_SAMPLING, maxNewTokens: Math.min(PROSE_SAMPLING.maxNewTokens, c.model.context_length - 16), rng: c.seed },
  );
  const prose = PROSE_PROMPTS.map((prompt, i) => ({ prompt, completion: out[i].text }));
  return { prose, code: codeSamples(code) };
}

/** 8 completions per prose prompt (seeds differ from the card's samples), for the fluency figures. */
function proseForFluency(lm: LanguageModel, c: PretrainConfig): string[] {
  const bos = lm.tokenizer.bosId === null ? '' : lm.tokenizer.decode([lm.tokenizer.bosId]);
  const prompts = PROSE_PROMPTS.flatMap((p) => new Array<string>(8).fill(bos + p));
  const out = lm.sample(prompts, { ...PROSE_SAMPLING, maxNewTokens: Math.min(PROSE_SAMPLING.maxNewTokens, c.model.context_length - 16), rng: c.seed + 1 });
  return out.map((o) => o.text);
}

function codeSamples(code: CodeEvalResult | null): Sample[] {
  return (code?.completions ?? []).slice(0, 3).map((r) => ({ prompt: r.prompt, completion: r.completion }));
}
