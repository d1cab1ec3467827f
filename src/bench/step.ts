/**
 * `magrpo bench --step`: where the time of one MAGRPO training step goes, on a real model's shape.
 *
 * The trainer's own `train` loop runs on SmolLM2-135M-Instruct's shape with random weights (written
 * to a temporary folder with a word-level tokenizer over its 49,152 ids, so a prompt of P words is
 * P tokens), or on the model given with `--model <folder or .gguf>`. The default work is the
 * issue's: 2 agents, LoRA r 16 (alpha 32) on all seven projections, G = 4 completions of 64 new
 * tokens per agent and item, prompts of 400 tokens (one per agent and item), rollout_buffer_size 2
 * (an update every second item), fluency metrics on (each agent's frozen reference copy scores its
 * completions), the config's default sampling (temperature 0.6, top-k 50, top-p 0.6). Untimed
 * warm-up items first (default 2: one update, so the first AdamW step and the buffer pools' growth
 * are not timed), then the timed items (default 2); with the trainer's sampling window both items
 * of a buffer are sampled in one batch (MAGRPO_ITEM_WINDOW=0: one by one), so the item counts
 * should be multiples of rollout_buffer_size.
 *
 * Every figure is per item. Phases (engine/profile.ts): sampling's prefill and decode, the
 * reference's scoring, the update's forward, backward and optimizer; each with the time spent in
 * kernels and outside them (JS, allocation, GC); "other" is the rest of the step (reward, fluency
 * metrics, tokenizer, the trainer's bookkeeping). Peak RSS is the process's VmHWM over the timed
 * items (reset after the warm-up where Linux allows, else over the whole process).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { kernelClock, type PhaseStat, takePhases, timePhases } from '../engine/profile.js';
import { Rng } from '../engine/rng.js';
import { backend, timeKernels } from '../engine/runtime.js';
import { tldrReward } from '../envs/writing/rewards.js';
import { parseModelConfig } from '../model/hf-config.js';
import { createModel, saveModel } from '../model/load.js';
import { loadTokenizer } from '../model/pretrained.js';
import type { ChatMessage } from '../model/tokenizer.js';
import { LocalAgent } from '../rl/agent-pool.js';
import type { Prompt } from '../rl/task.js';
import { MAGRPOTrainer } from '../rl/trainer.js';

/** SmolLM2-135M-Instruct's config.json (model keys): Llama, 30 layers, C 576, 9 heads / 3 KV heads, F 1536, V 49152, tied. */
export const SMOLLM2_135M: Record<string, unknown> = {
  model_type: 'llama',
  vocab_size: 49152,
  hidden_size: 576,
  intermediate_size: 1536,
  num_hidden_layers: 30,
  num_attention_heads: 9,
  num_key_value_heads: 3,
  max_position_embeddings: 8192,
  rms_norm_eps: 1e-5,
  rope_theta: 100000,
  tie_word_embeddings: true,
};

export interface StepBenchSettings {
  /** A model folder or .gguf file; null: random weights of `shape`. */
  model: string | null;
  /** HF config of the random-weights model. */
  shape: Record<string, unknown>;
  agents: number;
  group: number;
  newTokens: number;
  promptTokens: number;
  loraRank: number;
  bufferSize: number;
  warmupItems: number;
  items: number;
  threads: number;
  /** The trainer's `precision` (bf16: AMX tiles or AVX-512 BF16 where the CPU has them). */
  precision: 'fp32' | 'bf16';
  /**
   * `--peers` (step-peers.ts): real TL;DR items instead of the synthetic prompts, per item each
   * agent's chat messages, scored by magrpo's TL;DR reward (the peers' items and reward).
   */
  tldr?: ChatMessage[][][];
}

export function stepSettings(o: { model?: string; items?: number; warmup?: number; threads: number; precision?: 'fp32' | 'bf16' }): StepBenchSettings {
  return {
    model: o.model ?? null,
    shape: SMOLLM2_135M,
    agents: 2,
    group: 4,
    newTokens: 64,
    promptTokens: 400,
    loraRank: 16,
    bufferSize: 2,
    warmupItems: o.warmup ?? 2,
    items: o.items ?? 2,
    threads: o.threads,
    precision: o.precision ?? 'fp32',
  };
}

/** Phases in the order of a step; any other phase seen is listed after them. */
export const STEP_PHASES = ['sample/prefill', 'sample/decode', 'score/reference', 'score/rescore', 'update/forward', 'update/backward', 'update/optimizer'];

export interface StepPhaseRow {
  phase: string;
  calls: number;
  /** Seconds per item: wall, in kernels, outside kernels. */
  s: number;
  kernel_s: number;
  outside_s: number;
  share: number;
}

export interface StepBenchReport {
  command: string;
  date: string;
  machine: { cpu: string; logical_cpus: number };
  settings: Omit<StepBenchSettings, 'shape'> & { shape: string; params: number; shared_prefill: boolean; team_decode?: boolean; item_window?: boolean };
  load_average: { before: number[]; after: number[] };
  /** Wall seconds of each timed item. */
  item_s: number[];
  /**
   * CPU seconds (user + system, all threads) of each timed item: on a machine shared with other
   * jobs the wall time stretches with the load, the work done much less.
   */
  item_cpu_s?: number[];
  step_s: number;
  rows: StepPhaseRow[];
  /** Per item: prompt tokens per agent (mean), completion tokens sampled (all agents). */
  tokens: { prompt: number; completion: number };
  peak_rss_mb: number | null;
  /** Whether the peak was reset after the warm-up (else it is the whole process's). */
  peak_rss_timed_only: boolean;
  /** Mean joint reward of each item, warm-up items first (TL;DR items only: `--peers`). */
  reward_means?: number[];
}

interface Item {
  prompts: Prompt[];
}

/** A random-weights model folder of `hf`'s shape with a word-level tokenizer (`w<id>` per id, `<eos>` = 0). */
export function writeRandomModel(hf: Record<string, unknown>, seed = 1): string {
  const dir = mkdtempSync(join(tmpdir(), 'magrpo-bench-step-'));
  const model = createModel(parseModelConfig(hf));
  model.initialize(new Rng(seed));
  saveModel(model, dir);
  const vocab: Record<string, number> = { '<eos>': 0 };
  for (let id = 1; id < model.vocabSize; id++) vocab[`w${id}`] = id;
  const eos = { id: 0, content: '<eos>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true };
  const tokenizer = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [eos],
    normalizer: null,
    pre_tokenizer: { type: 'WhitespaceSplit' },
    post_processor: null,
    decoder: null,
    model: { type: 'WordLevel', vocab, unk_token: '<eos>' },
  };
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(tokenizer));
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ eos_token: '<eos>', pad_token: '<eos>' }));
  return dir;
}

const PASSAGE =
  'The river town had grown around a single bridge, and for two centuries every market, quarrel and wedding ' +
  'had crossed it. When the council proposed a second bridge upstream, the ferrymen objected that their trade ' +
  'would vanish, the shopkeepers near the old span feared the same, and the farmers on the far bank argued that ' +
  'an hour saved each way would pay for the stones within ten years. The debate filled the newspaper for a season. ';

/** Prompts of about `tokens` tokens, one per agent and item, different from each other. */
function makePrompts(s: StepBenchSettings, dir: string, random: boolean, count: number): Item[] {
  const rng = new Rng(7);
  if (random) {
    const V = Number(s.shape.vocab_size);
    const words = () => Array.from({ length: s.promptTokens }, () => `w${1 + Math.floor(rng.next() * (V - 1))}`).join(' ');
    return Array.from({ length: count }, () => ({ prompts: Array.from({ length: s.agents }, words) }));
  }
  const tok = loadTokenizer(dir);
  const prompt = (item: number, agent: number) => {
    const head = `Agent ${agent + 1}, report ${item + 1}: summarise the story below ${agent === 0 ? 'in one sentence' : 'in detail'}.\n\n`;
    let text = head;
    while (tok.encode(text).length < s.promptTokens) text += PASSAGE;
    return tok.decode(tok.encode(text).slice(0, s.promptTokens), { skipSpecialTokens: true });
  };
  return Array.from({ length: count }, (_, i) => ({ prompts: Array.from({ length: s.agents }, (_, a) => prompt(i, a)) }));
}

/** VmHWM of this process in MB (null off Linux). */
function peakRssMb(): number | null {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'));
    return m ? Number(m[1]) / 1024 : null;
  } catch {
    return null;
  }
}

/** Resets VmHWM to the current RSS (Linux ≥ 4.0); false where that is not possible. */
function resetPeakRss(): boolean {
  try {
    writeFileSync('/proc/self/clear_refs', '5');
    return true;
  } catch {
    return false;
  }
}

/** Runs the warm-up and timed items through the trainer and returns the per-item profile. */
export async function measureStep(s: StepBenchSettings, log: (m: string) => void = () => {}): Promise<StepBenchReport> {
  if (s.items < 1) throw new Error(`--items must be ≥ 1, got ${s.items}`);
  const loadBefore = loadavg();
  backend().setNumThreads(s.threads);
  timeKernels();
  timePhases(true);
  const random = s.model === null;
  if (random) log(`writing random weights of ${s.shape.num_hidden_layers} layers, hidden ${s.shape.hidden_size} to a temporary folder`);
  const dir = s.model ?? writeRandomModel(s.shape);
  try {
    // One item more than is run: the timed items end with a stop, not with the epoch's closing drain.
    const items = s.tldr ? s.tldr.map((prompts) => ({ prompts })) : makePrompts(s, dir, random, s.warmupItems + s.items + 1);
    if (items.length < s.warmupItems + s.items) throw new Error(`${items.length} items given, need ${s.warmupItems + s.items}`);
    const rewardMeans: number[] = [];
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
    const cpuMs = () => {
      const u = process.cpuUsage();
      return (u.user + u.system) / 1000;
    };
    // Item boundaries as the trainer reports them: with a sampling window the first item of each
    // window carries the whole window's sampling, so only whole windows compare.
    let mark = { wall: 0, cpu: 0 };
    const itemMs: number[] = [];
    const itemCpuMs: number[] = [];
    let timing = false;
    let promptTokens = 0;
    let completionTokens = 0;
    const trainer = new MAGRPOTrainer<Item>({
      task: {
        name: 'bench-step',
        dataset: items,
        formatters: Array.from({ length: s.agents }, (_, a) => (it: Item) => it.prompts[a]),
        reward: s.tldr
          ? ({ completions }) => tldrReward(completions[0], completions[1]).reward
          : // Any reward that tells completions apart: the update must have nonzero advantages.
            ({ completions }) => completions.reduce((acc, c, i) => acc + ((c.length * (i + 3)) % 17), 0),
      },
      model: dir,
      config: {
        num_agents: s.agents,
        num_generations: s.group,
        max_new_tokens: s.newTokens,
        rollout_buffer_size: s.bufferSize,
        precision: s.precision,
        lora: { r: s.loraRank, alpha: 2 * s.loraRank, target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] },
        eval_interval: 0,
      },
      onTree: ({ root }) => {
        rewardMeans.push(mean(root.rewards));
        if (!timing) return;
        for (const g of root.groups) {
          promptTokens += g.promptIds.length / root.groups.length;
          for (const c of g.completions) completionTokens += c.ids.length;
        }
      },
      onItem: () => {
        if (!timing) return;
        const now = { wall: performance.now(), cpu: cpuMs() };
        itemMs.push(now.wall - mark.wall);
        itemCpuMs.push(now.cpu - mark.cpu);
        mark = now;
      },
    });
    const first = trainer.agents[0];
    const params = first instanceof LocalAgent ? first.agent.lm.model.numParams() : 0;
    try {
      log(`${s.warmupItems} warm-up item(s)`);
      await trainer.train({ maxItems: s.warmupItems });
      takePhases();
      const timedOnly = resetPeakRss();
      const k0 = kernelClock();
      log(`${s.items} timed item(s)`);
      timing = true;
      mark = { wall: performance.now(), cpu: cpuMs() };
      await trainer.train({ maxItems: s.warmupItems + s.items });
      const phases = takePhases();
      const totalMs = itemMs.reduce((a, b) => a + b, 0);
      const kernelMs = kernelClock() - k0;
      return {
        command: `magrpo bench ${process.argv.slice(3).join(' ')}`.trim(),
        date: new Date().toISOString(),
        machine: { cpu: cpus()[0]?.model ?? 'unknown', logical_cpus: availableParallelism() },
        settings: {
          ...s,
          shape: random ? shapeLabel(s.shape) : 'the given model',
          params,
          shared_prefill: process.env.MAGRPO_SHARED_PREFILL !== '0',
          team_decode: process.env.MAGRPO_TEAM_DECODE !== '0',
          item_window: process.env.MAGRPO_ITEM_WINDOW !== '0',
        },
        load_average: { before: loadBefore, after: loadavg() },
        item_s: itemMs.map((ms) => ms / 1000),
        item_cpu_s: itemCpuMs.map((ms) => ms / 1000),
        step_s: totalMs / 1000 / s.items,
        rows: phaseRows(phases, totalMs, kernelMs, s.items),
        tokens: { prompt: promptTokens / s.items, completion: completionTokens / s.items },
        peak_rss_mb: peakRssMb(),
        peak_rss_timed_only: timedOnly,
        ...(s.tldr ? { reward_means: rewardMeans } : {}),
      };
    } finally {
      await trainer.close();
    }
  } finally {
    if (random) rmSync(dir, { recursive: true, force: true });
  }
}

function shapeLabel(hf: Record<string, unknown>): string {
  const c = parseModelConfig(hf);
  return `${c.arch}, L${c.numLayers} C${c.hiddenSize} H${c.numHeads}/${c.numKvHeads}kv F${c.intermediateSize} V${c.vocabSize}, random weights`;
}

/** The phase table per item, in step order, then the rest of the step as "other". */
export function phaseRows(phases: Map<string, PhaseStat>, totalMs: number, kernelMs: number, items: number): StepPhaseRow[] {
  const names = [...STEP_PHASES.filter((p) => phases.has(p)), ...[...phases.keys()].filter((p) => !STEP_PHASES.includes(p))];
  const row = (phase: string, calls: number, ms: number, kms: number): StepPhaseRow => ({
    phase,
    calls,
    s: ms / 1000 / items,
    kernel_s: kms / 1000 / items,
    outside_s: (ms - kms) / 1000 / items,
    share: totalMs > 0 ? ms / totalMs : 0,
  });
  const rows = names.map((p) => {
    const st = phases.get(p) as PhaseStat;
    return row(p, st.calls, st.ms, st.kernelMs);
  });
  const inPhases = names.reduce((a, p) => a + (phases.get(p) as PhaseStat).ms, 0);
  const kernelInPhases = names.reduce((a, p) => a + (phases.get(p) as PhaseStat).kernelMs, 0);
  rows.push(row('other', 0, totalMs - inPhases, kernelMs - kernelInPhases));
  rows.push(row('step', items, totalMs, kernelMs));
  return rows;
}

export function formatStep(r: StepBenchReport): string {
  const s = r.settings;
  const f = (x: number) => x.toFixed(2);
  const lines = [
    `MAGRPO step profile: ${s.model ?? s.shape} (${(s.params / 1e6).toFixed(1)} M parameters), ${s.agents} agents, LoRA r ${s.loraRank} on all seven projections,`,
    `G ${s.group} × ${s.newTokens} new tokens per agent, prompts of ${r.tokens.prompt.toFixed(0)} tokens, rollout_buffer_size ${s.bufferSize}; ${s.threads} thread(s);`,
    `${s.items} timed item(s) after ${s.warmupItems} warm-up; precision ${s.precision ?? 'fp32'}; shared prefill ${s.shared_prefill ? 'on' : 'off (MAGRPO_SHARED_PREFILL=0)'}; agents decode ${s.team_decode === false ? 'one after another (MAGRPO_TEAM_DECODE=0)' : 'together'}; a buffer's items sampled ${s.item_window === false ? 'one by one (MAGRPO_ITEM_WINDOW=0)' : 'together'}; load average ${r.load_average.before[0].toFixed(1)} → ${r.load_average.after[0].toFixed(1)}`,
    '',
    '| phase | calls | s / item | share | in kernels s | outside kernels s |',
    '| --- | --- | --- | --- | --- | --- |',
    ...r.rows.map((x) => `| ${x.phase} | ${x.calls} | ${f(x.s)} | ${(100 * x.share).toFixed(1)}% | ${f(x.kernel_s)} | ${f(x.outside_s)} |`),
    '',
    `items: ${r.item_s.map(f).join(', ')} s${r.item_cpu_s ? ` (CPU ${r.item_cpu_s.map(f).join(', ')} s)` : ''}; completion tokens per item ${r.tokens.completion.toFixed(0)}; peak RSS ${r.peak_rss_mb === null ? 'unknown' : `${r.peak_rss_mb.toFixed(0)} MB`}${r.peak_rss_timed_only ? ' (timed items)' : ' (whole process)'}`,
  ];
  return `${lines.join('\n')}\n`;
}

/** The options of `magrpo bench --step` (and of `--step --peers`, step-peers.ts). */
export interface StepBenchFlags {
  model?: string;
  items?: number;
  warmup?: number;
  threads: number;
  json?: boolean;
  out?: string;
  peers?: string | boolean;
  precision?: 'fp32' | 'bf16';
}

/** `magrpo bench --step`: measures, prints the table (or JSON) and writes `--out`. */
export async function runStepBench(flags: StepBenchFlags): Promise<void> {
  if (flags.peers !== undefined && flags.peers !== false) {
    const { runStepPeersBench } = await import('./step-peers.js');
    return runStepPeersBench(flags);
  }
  const report = await measureStep(stepSettings(flags), (m) => process.stderr.write(`[bench] ${m}\n`));
  if (flags.out) writeFileSync(flags.out, `${JSON.stringify(report, null, 2)}\n`);
  process.stdout.write(flags.json ? `${JSON.stringify(report)}\n` : formatStep(report));
}
