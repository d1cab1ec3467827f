/** The README.md of a shipped base model: what it is, what it was trained on, and what it measures. */
import type { CodeEvalResult } from './code-eval.js';
import type { PretrainConfig } from './config.js';
import type { TokenStreamStamp } from './dataset.js';

/** The measured facts of a shipped model, written as eval.json next to the card. */
export interface EvalJson {
  version: number;
  model: { parameters: number; non_embedding_parameters: number; dtype: string };
  training: {
    completed: boolean;
    steps: number;
    max_steps: number;
    tokens: number;
    tokens_per_step: number;
    epochs: number;
    wall_time_s: number;
    /** Mean training loss over the last `final_train_loss_steps` steps. */
    final_train_loss: number | null;
    final_train_loss_steps: number;
    /** Validation loss of the F32 weights at the last step. */
    final_val_loss_f32: number | null;
  };
  perplexity: {
    definition: string;
    split: string;
    corpus_sha256: string;
    tokenizer_sha256: string;
    stream_tokens: number;
    window_tokens: number;
    offsets: number[];
    targets: number;
    mean_nll: number;
    perplexity: number;
  };
  code: Omit<CodeEvalResult, 'completions'> | null;
  /** Fluency of sampled prose (src/text/fluency-measures.ts), averaged over `samples` completions. */
  prose_fluency?: { samples: number; word_validity: number; distinct_2: number; repetition: number };
  /** Where training ran (cpu model, ISA, threads, backend). */
  machine?: Record<string, string | number>;
}

/** One source of the training corpus: its share of documents and characters. */
export interface CorpusSource {
  source: string;
  docs: number;
  chars: number;
}

export interface Sample {
  prompt: string;
  completion: string;
}

export interface ModelCardInput {
  config: PretrainConfig;
  configFile: string;
  eval: EvalJson;
  modelConfig: Record<string, unknown>;
  trainStamp: TokenStreamStamp;
  trainCorpusSha256: string;
  samples: { prose: Sample[]; code: Sample[] };
  /** [step, validation loss] of every evaluation during training (F32 weights). */
  valCurve: readonly (readonly [number, number])[];
  proseSampling: { temperature: number; topP: number; maxNewTokens: number };
  codeStops: readonly string[];
  /** Documents and characters per `source` of the training corpus. */
  sources: readonly CorpusSource[];
}

const int = (n: number) => Math.round(n).toLocaleString('en-US');
const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

function duration(s: number): string {
  const h = Math.floor(s / 3600);
  const m = Math.round((s % 3600) / 60);
  return h > 0 ? `${h} h ${m} min` : `${m} min`;
}

function fence(text: string, lang = ''): string {
  return `\`\`\`${lang}\n${text.replace(/```/g, "'''")}\n\`\`\``;
}

/** A last-interval validation improvement below this fraction counts as flat. */
const FLAT_RELATIVE_CHANGE = 0.005;

/** The validation losses as a one-row-per-evaluation table, with the change since the previous one. */
function valCurveLines(curve: ModelCardInput['valCurve']): string[] {
  if (curve.length === 0) return [];
  const rows = curve.map(([step, loss], i) => `| ${int(step)} | ${loss.toFixed(4)} | ${i === 0 ? '' : (loss - curve[i - 1][1]).toFixed(4)} |`);
  const lines = ['Validation loss during training:', '', '| step | validation loss | change |', '| --- | --- | --- |', ...rows, ''];
  if (curve.length >= 2) {
    const [[s0, l0], [s1, l1]] = curve.slice(-2);
    const rel = (l1 - l0) / l0;
    const verdict =
      rel < -FLAT_RELATIVE_CHANGE
        ? 'it had **not flattened** — the run was sized to its time budget, and more tokens would lower it further.'
        : 'it had flattened.';
    lines.push(`Over the last ${int(s1 - s0)} steps the validation loss changed by ${(l1 - l0).toFixed(4)} nats (${(100 * rel).toFixed(1)}%): ${verdict}`, '');
  }
  return lines;
}

const PROSE_PER_PROMPT_NOTE = 'the prompts above, several seeds each';

/** The corpus sources as a table, largest first. */
function sourceLines(sources: readonly CorpusSource[]): string[] {
  if (sources.length === 0) return [];
  const chars = sources.reduce((a, s) => a + s.chars, 0);
  const rows = [...sources].sort((a, b) => b.chars - a.chars).map((s) => `| ${s.source} | ${int(s.docs)} | ${int(s.chars)} | ${pct(s.chars / chars)} |`);
  return ['| source | documents | characters | share |', '| --- | --- | --- | --- |', ...rows, ''];
}

export function renderModelCard(x: ModelCardInput): string {
  const { config: c, eval: e } = x;
  const m = c.model;
  const t = c.train;
  const tr = e.training;
  const name = c.export.dir.split('/').filter(Boolean).pop() ?? c.export.dir;
  const status = tr.completed
    ? `Training ran to completion: ${int(tr.steps)} of ${int(tr.max_steps)} steps.`
    : `**Training stopped early, at step ${int(tr.steps)} of ${int(tr.max_steps)}** (the learning rate had not finished its cosine decay); these are the weights of that checkpoint.`;
  const finalTrain = tr.final_train_loss === null ? '—' : `${tr.final_train_loss.toFixed(4)} (mean of the last ${tr.final_train_loss_steps} steps)`;
  const finalVal = tr.final_val_loss_f32 === null ? '—' : tr.final_val_loss_f32.toFixed(4);
  const code = e.code;
  const lines = [
    `# magrpo-${name}`,
    '',
    `A ${e.model.parameters >= 1e6 ? `${(e.model.parameters / 1e6).toFixed(2)} M` : `${(e.model.parameters / 1e3).toFixed(0)} K`}-parameter Llama-style base language model ${
      c.init_from === null
        ? 'pretrained from scratch'
        : `continued from \`${c.init_from}\` ([its card](../../${c.init_from}/README.md): architecture, first corpus, first run)`
    } by`,
    `magrpo's own TypeScript engine on CPU, on the ${c.init_from === null ? 'prose + code corpus' : 'corpus'} listed below. It is a research`,
    'and test artefact: a starting point for MAGRPO experiments and tests, not a useful assistant.',
    ...(c.init_from === null
      ? []
      : [
          '',
          `Steps, tokens, wall time and the loss curve below are this stage's alone (the optimiser and the learning-rate schedule started anew); the`,
          `weights started as \`${c.init_from}\`'s.`,
        ]),
    '',
    '## Architecture',
    '',
    '| | |',
    '| --- | --- |',
    '| architecture | `LlamaForCausalLM` (RMSNorm, RoPE, SwiGLU MLP, no biases) |',
    `| parameters | ${int(e.model.parameters)} (${int(e.model.non_embedding_parameters)} without the embedding) |`,
    `| layers × hidden | ${m.num_layers} × ${m.hidden_size} |`,
    `| heads (key/value heads) × head size | ${m.num_heads} (${m.num_kv_heads ?? m.num_heads}) × ${m.hidden_size / m.num_heads} |`,
    `| MLP width | ${m.intermediate_size} (${(m.intermediate_size / m.hidden_size).toFixed(2)}× hidden) |`,
    `| context | ${m.context_length} tokens |`,
    `| vocabulary | ${x.modelConfig.vocab_size} (byte-level BPE, [data/tokenizer](../../data/README.md#tokenizer)) |`,
    `| embeddings | ${m.tie_word_embeddings ? 'tied (the LM head is the embedding matrix)' : 'untied'} |`,
    `| RoPE θ, RMSNorm ε | ${m.rope_theta}, ${m.rms_norm_eps} |`,
    `| weights | \`model.safetensors\`, ${e.model.dtype} (trained in F32) |`,
    '',
    '## Data',
    '',
    `The training corpus \`${c.data.train}\` — public-domain and permissively licensed English prose, documentation`,
    `and code; sources, licences and processing are in the [data card](../../${c.data.card}). HumanEval is not part of it.`,
    '',
    ...sourceLines(x.sources),
    '| file | sha256 |',
    '| --- | --- |',
    `| \`${c.data.train}\` | \`${x.trainCorpusSha256}\` |`,
    `| \`${e.perplexity.split}\` | \`${e.perplexity.corpus_sha256}\` |`,
    `| \`${c.data.tokenizer}/tokenizer.json\` | \`${e.perplexity.tokenizer_sha256}\` |`,
    '',
    `Documents are tokenized once and joined as \`<|bos|> doc <|eos|> <|bos|> doc <|eos|> …\`: ${int(x.trainStamp.tokens)} training tokens`,
    `from ${int(x.trainStamp.docs)} documents. Training windows of ${m.context_length + 1} tokens start at uniformly random offsets.`,
    '',
    '## Training',
    '',
    status,
    '',
    '| | |',
    '| --- | --- |',
    `| steps | ${int(tr.steps)} |`,
    `| batch | ${t.micro_batch_size} windows × ${m.context_length} tokens × ${t.grad_accum_steps} accumulation = ${int(tr.tokens_per_step)} tokens/step |`,
    `| tokens seen | ${int(tr.tokens)} (${tr.epochs.toFixed(2)} epochs of the training stream) |`,
    `| optimizer | AdamW, β = (${t.beta1}, ${t.beta2}), ε = 1e-8, weight decay ${t.weight_decay} on matrices (incl. the tied embedding), none on norms |`,
    `| learning rate | ${t.learning_rate}: linear warmup over ${t.warmup_steps} steps, cosine decay to ${t.min_lr_ratio} × peak at step ${int(t.max_steps)} |`,
    `| gradient clipping | ${t.grad_clip === null ? 'off' : `global norm ${t.grad_clip}`} |`,
    `| seed | ${c.seed} |`,
    `| wall time | ${duration(tr.wall_time_s)} (${int(tr.wall_time_s)} s, validation passes included) |`,
    ...(e.machine
      ? [
          `| machine | ${Object.entries(e.machine)
            .map(([k, v]) => `${k} ${v}`)
            .join(', ')} |`,
        ]
      : []),
    `| final training loss | ${finalTrain} |`,
    `| final validation loss | ${finalVal} (F32 weights, fixed windows below) |`,
    '',
    '![loss curve](loss.png)',
    '',
    ...valCurveLines(x.valCurve),
    '## Evaluation',
    '',
    `**Validation perplexity: ${e.perplexity.perplexity.toFixed(2)}** (mean token NLL ${e.perplexity.mean_nll.toFixed(4)} nats) of the shipped ${e.model.dtype} weights.`,
    '',
    `Definition (also in \`eval.json\`, with the ${e.perplexity.offsets.length} window offsets): ${e.perplexity.definition}`,
    `Here: ${e.perplexity.offsets.length} windows of ${e.perplexity.window_tokens} tokens over a stream of ${int(e.perplexity.stream_tokens)} tokens, ${int(e.perplexity.targets)} targets.`,
    '`test/model/shipped.test.ts` recomputes it.',
    '',
  ];
  if (code !== null) {
    lines.push(
      `**Code.** ${code.tasks} held-out Python tasks from \`generatePyTasks\` (seed ${code.seed}, not the corpus seed; ${code.skipped_overlap}`,
      'generated candidates were skipped because their prompt or signature + first docstring line occurs in the',
      `training corpus, and ${code.skipped_length} because prompt + completion would not fit the context).`,
      'Prompt: `<|bos|>` + helper code (if any) + signature + docstring, without its final newline (the tokenizer',
      'merges a newline with the indentation after it, so the model writes both); one completion each,',
      `temperature ${code.temperature}, at most ${code.max_new_tokens} new tokens, stopping at ${x.codeStops.map((s) => `\`${JSON.stringify(s).slice(1, -1)}\``).join(', ')}.`,
      '',
      '| measure | share |',
      '| --- | --- |',
      `| completion continues the function (first non-blank line indented) and prompt + completion passes \`ast.parse\` | ${pct(code.parse_rate)} |`,
      `| passes all of the task's asserts in the sandbox | ${pct(code.pass_rate)} |`,
      '',
      'Every completion is in `code_completions.jsonl`.',
      '',
    );
  }
  lines.push(
    '## Samples',
    '',
    `Prose: temperature ${x.proseSampling.temperature}, top-p ${x.proseSampling.topP}, ${x.proseSampling.maxNewTokens} new tokens, prompt prefixed with \`<|bos|>\`.`,
    '',
  );
  for (const s of x.samples.prose) lines.push(fence(`${s.prompt}⟨${s.completion}⟩`), '');
  const f = e.prose_fluency;
  if (f)
    lines.push(
      `Fluency of ${f.samples} such prose completions (${PROSE_PER_PROMPT_NOTE}; src/text/fluency-measures.ts): word validity ${pct(f.word_validity)} of letters in real words,`,
      `distinct-2 ${f.distinct_2.toFixed(3)}, repetition ${f.repetition.toFixed(3)}.`,
      '',
    );
  if (x.samples.code.length > 0) {
    lines.push('Code (the first held-out tasks above; the completion is between ⟨ ⟩):', '');
    for (const s of x.samples.code) lines.push(fence(`${s.prompt}⟨${s.completion}⟩`, 'python'), '');
  }
  lines.push(
    '## Use',
    '',
    fence(`magrpo sample -m ${c.export.dir} -p "Call me Ishmael." -n 40 --seed 3`, 'sh'),
    '',
    'From TypeScript: `LanguageModel.load(dir)` (src/model/pretrained.ts). The folder is a standard Hugging Face',
    'checkpoint (config.json, generation_config.json, model.safetensors, tokenizer.json, tokenizer_config.json with',
    'the chat template).',
    '',
    '## Reproduce',
    '',
    fence(
      [
        'npm ci && npm run build:native',
        `# the corpus ${c.data.train}: built as its data card (${c.data.card}) says`,
        ...(c.init_from === null ? [] : [`# the starting weights: ${c.init_from} (reproduced as its own card says)`]),
        `nice -n 10 env MAGRPO_NUM_THREADS=2 npx tsx src/cli/main.ts pretrain ${x.configFile}`,
        `# interrupted? continue exactly where it stopped:`,
        `nice -n 10 env MAGRPO_NUM_THREADS=2 npx tsx src/cli/main.ts pretrain ${x.configFile} --resume`,
      ].join('\n'),
      'sh',
    ),
    '',
    'Training is deterministic for a given thread count and machine (seeded initialisation and window sampling;',
    'a resumed run repeats the uninterrupted losses exactly). The run folder holds `metrics.jsonl`, the loss plot',
    'and resumable checkpoints.',
    '',
    '## Limitations',
    '',
    'Tiny model, small corpus, short training: the text is locally fluent at best, facts are unreliable, and code',
    'completions mostly imitate the shape of the generated Python functions. English only. The prose sources carry',
    'the biases of their periods (19th-century fiction, 1790–2016 political speeches, 1961 American English, the King James Bible).',
    '',
  );
  return lines.join('\n');
}
