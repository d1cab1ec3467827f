/**
 * `magrpo bench --step --peers`: the MAGRPO step next to other engines on the same machine, model
 * and settings (issue 34, item 3). The real model is required (`--model`, a .gguf file or an HF
 * folder). Both sides run the TL;DR writing task of the real-model demo (configs/demo-tldr-smollm2.yaml):
 * its first training items whose chat prompts hold at most 400 tokens for both agents, magrpo's
 * TL;DR reward, 2 agents, LoRA r 16 (alpha 32) on all seven projections, G = 4 × 64 new tokens,
 * rollout_buffer_size 2, the config's default sampling and learning rate. Then, one at a time,
 * each in a fresh process under /usr/bin/time -v (peak RSS), with the load average before and after:
 *
 *   comlrl     CoMLRL 1.4.3's MAGRPOTrainer (scripts/bench_step_peers.py, .cache/venv-peers)
 *   trl        TRL's GRPOTrainer, one agent (N = 1), same LoRA, G and tokens
 *   llama.cpp  sampling only: batch 8 × 64 new tokens after one 300-token prompt, prefilled once and
 *              its KV cache copied to the 8 sequences, on the same GGUF
 *              (scripts/bench_llama.py, .cache/venv-llama), with use_extra_bufts off (the AMX
 *              buffer path SIGILLs on quantized weights on some Xeons: test/helpers/llama-cpp.ts)
 *
 * The record (`--out`, e.g. bench/step/peers/<name>.json) holds magrpo's step profile and each
 * peer's figures side by side; scripts/bench-report.mjs writes its table into docs/benchmarks.md.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { packageRoot } from '../data/package-root.js';
import { tldrEnvironment } from '../envs/writing/index.js';
import { convertGguf, isGgufFile } from '../model/gguf-import.js';
import { loadTokenizer } from '../model/pretrained.js';
import type { ChatMessage } from '../model/tokenizer.js';
import { formattersFor } from '../rl/task.js';
import { formatStep, measureStep, type StepBenchFlags, type StepBenchReport, type StepBenchSettings, stepSettings } from './step.js';

export const PEERS = ['comlrl', 'trl', 'llama.cpp'] as const;
export type PeerName = (typeof PEERS)[number];

/** One TL;DR training item as both sides see it: per agent the chat messages, the text magrpo renders, its token ids. */
export interface PeerItem {
  index: number;
  messages: ChatMessage[][];
  prompts: string[];
  ids: number[][];
}

/** The first `count` TL;DR training items whose chat prompts hold at most `maxTokens` tokens for every agent. */
export function tldrPeerItems(model: string, count: number, maxTokens: number): { items: PeerItem[]; skipped: number } {
  const task = tldrEnvironment({ prompt_style: 'chat' }).task();
  const tok = loadTokenizer(model);
  const items: PeerItem[] = [];
  let skipped = 0;
  for (let i = 0; i < task.dataset.length && items.length < count; i++) {
    const messages = formattersFor(task, 2).map((f) => f(task.dataset[i]) as ChatMessage[]);
    const ids = messages.map((m) => tok.promptIds(m));
    if (ids.some((x) => x.length > maxTokens)) {
      skipped++;
      continue;
    }
    items.push({ index: i, messages, prompts: messages.map((m) => tok.renderPrompt(m)), ids });
  }
  if (items.length < count) throw new Error(`only ${items.length} TL;DR items have prompts of ≤ ${maxTokens} tokens, need ${count}`);
  return { items, skipped };
}

/** What a peer run returned, with what the bench measured around it. */
export interface PeerRun {
  engine: PeerName;
  command: string;
  ok: boolean;
  why?: string;
  /** The peer's JSON (scripts/bench_step_peers.py or scripts/bench_llama.py). */
  result?: Record<string, unknown>;
  /** Mean seconds of the timed MAGRPO items (comlrl), GRPO steps of one agent (trl); null for llama.cpp. */
  s_per_item?: number | null;
  /** llama.cpp: tokens/s of 8 × 64 new tokens after the prompt. */
  sample_tokens_per_s?: number;
  /** /usr/bin/time -v's maximum resident set size, MB. */
  peak_rss_mb: number | null;
  wall_s: number;
  load_average: { before: number[]; after: number[] };
}

export interface StepPeersReport {
  kind: 'step-peers';
  command: string;
  date: string;
  machine: { cpu: string; logical_cpus: number; shared: string };
  model: { given: string; hf_folder: string; gguf: string | null };
  settings: StepBenchSettings & {
    prompt_style: 'chat';
    max_prompt_tokens: number;
    temperature: number;
    top_p: number;
    top_k: number | null;
    learning_rate: number;
  };
  items: { index: number; prompt_tokens: number[] }[];
  skipped_items: number;
  magrpo: StepBenchReport;
  peers: PeerRun[];
  llama: { batch: number; prompt_tokens: number; new_tokens: number };
}

/** `uptime`'s load averages at the moment. */
const load = () => loadavg().map((x) => Math.round(x * 100) / 100);

/** Runs `cmd` under /usr/bin/time -v (when there) and returns its last stdout line as JSON, its peak RSS and wall time. */
function runTimed(cmd: string, args: string[], env: NodeJS.ProcessEnv, log: (m: string) => void) {
  const time = existsSync('/usr/bin/time');
  const before = load();
  const t0 = performance.now();
  const r = spawnSync(time ? '/usr/bin/time' : cmd, time ? ['-v', cmd, ...args] : args, {
    encoding: 'utf8',
    env,
    maxBuffer: 64 << 20,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const wall = (performance.now() - t0) / 1000;
  const after = load();
  const stderr = r.stderr ?? '';
  for (const line of stderr.split('\n')) if (/^\[(comlrl|trl)\]/.test(line)) log(line);
  const rss = /Maximum resident set size \(kbytes\): (\d+)/.exec(stderr);
  const last = (r.stdout ?? '').trim().split('\n').at(-1) ?? '';
  let result: Record<string, unknown> | undefined;
  try {
    result = JSON.parse(last);
  } catch {
    result = undefined;
  }
  const why = r.error
    ? String(r.error)
    : r.status !== 0 || result === undefined
      ? `exit ${r.status ?? r.signal}: ${stderr.trim().split('\n').slice(-6).join(' | ')}`
      : undefined;
  return { result, why, peak_rss_mb: rss ? Number(rss[1]) / 1024 : null, wall_s: wall, load_average: { before, after } };
}

/** The GGUF matching the HF folder for llama.cpp: the given file, or none. */
function ggufOf(model: string): string | null {
  return isGgufFile(model) ? model : null;
}

export async function runStepPeersBench(flags: StepBenchFlags): Promise<void> {
  const log = (m: string) => process.stderr.write(`[bench] ${m}\n`);
  if (flags.model === undefined) throw new Error('--peers needs --model: the real model (a .gguf file or an HF folder), e.g. SmolLM2-135M-Instruct.Q4_1.gguf');
  const given = resolve(flags.model);
  const wanted = typeof flags.peers === 'string' ? flags.peers.split(',').map((p) => p.trim()) : [...PEERS];
  for (const p of wanted) if (!(PEERS as readonly string[]).includes(p)) throw new Error(`--peers: unknown peer "${p}" (${PEERS.join(', ')})`);
  const root = packageRoot();
  const tmp = mkdtempSync(join(tmpdir(), 'magrpo-bench-peers-'));
  try {
    // The peers read an HF folder: a .gguf is converted (dequantized to fp32), as `magrpo convert` does.
    let hf = given;
    if (isGgufFile(given)) {
      hf = join(tmp, 'hf');
      log(`converting ${given} to an HF folder for the peers`);
      convertGguf(given, hf, { dtype: 'F32' });
    } else if (!statSync(given).isDirectory()) throw new Error(`--model ${given}: neither a .gguf file nor a folder`);
    const base = stepSettings({ model: given, items: flags.items ?? 3, warmup: flags.warmup ?? 1, threads: flags.threads });
    const maxPromptTokens = 400;
    const { items, skipped } = tldrPeerItems(given, base.warmupItems + base.items, maxPromptTokens);
    // The trainer's defaults (src/rl/config.ts), which are CoMLRL's MAGRPOConfig defaults too.
    const settings = {
      ...base,
      prompt_style: 'chat' as const,
      max_prompt_tokens: maxPromptTokens,
      temperature: 0.6,
      top_p: 0.6,
      top_k: 50 as number | null,
      learning_rate: 5e-6,
    };
    const lora = { r: base.loraRank, alpha: 2 * base.loraRank, target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] };
    const itemsFile = join(tmp, 'items.json');
    writeFileSync(
      itemsFile,
      JSON.stringify({
        settings: {
          agents: base.agents,
          group: base.group,
          new_tokens: base.newTokens,
          buffer_size: base.bufferSize,
          warmup_items: base.warmupItems,
          items: base.items,
          lora,
          temperature: settings.temperature,
          top_p: settings.top_p,
          top_k: settings.top_k,
          learning_rate: settings.learning_rate,
        },
        items,
      }),
    );

    log(
      `magrpo: ${base.warmupItems} warm-up + ${base.items} timed TL;DR items (${items.map((it) => it.ids.map((x) => x.length).join('/')).join(', ')} prompt tokens)`,
    );
    const magrpo = await measureStep({ ...base, tldr: items.map((it) => it.messages) });
    process.stderr.write(formatStep(magrpo));

    const peers: PeerRun[] = [];
    const peersPython = join(root, '.cache', 'venv-peers', 'bin', 'python');
    const llamaPython = join(root, '.cache', 'venv-llama', 'bin', 'python');
    const gguf = ggufOf(given);
    const env = {
      ...process.env,
      OMP_NUM_THREADS: String(flags.threads),
      MKL_NUM_THREADS: String(flags.threads),
      TOKENIZERS_PARALLELISM: 'false',
      WANDB_MODE: 'disabled',
    };
    for (const engine of wanted as PeerName[]) {
      if (engine === 'llama.cpp') {
        const args = [
          join(root, 'scripts', 'bench_llama.py'),
          '--model',
          gguf ?? '',
          '--threads',
          String(flags.threads),
          '--sample-batches',
          '8',
          '--prompt-len',
          '300',
          '--new-tokens',
          String(base.newTokens),
          '--reps',
          '3',
          '--warmup',
          '1,1,0',
          '--no-extra-bufts',
          // One prompt for the 8 sequences, prefilled once: magrpo's G samples share their prompt too.
          '--shared-prompt',
        ];
        const command = `${llamaPython} ${args.join(' ')}`;
        if (gguf === null || !existsSync(llamaPython)) {
          peers.push({
            engine,
            command,
            ok: false,
            why: gguf === null ? 'needs --model as a .gguf file' : `${llamaPython} not found (bash scripts/setup.sh --with-llama)`,
            peak_rss_mb: null,
            wall_s: 0,
            load_average: { before: load(), after: load() },
          });
          continue;
        }
        log(`llama.cpp: batch 8 × ${base.newTokens} tokens after 300 prompt tokens`);
        const r = runTimed(llamaPython, args, { ...process.env, OMP_NUM_THREADS: String(flags.threads) }, log);
        const walls = (r.result?.sample as Record<string, { wall: number[] }> | undefined)?.['8']?.wall ?? [];
        const med = [...walls].sort((a, b) => a - b)[Math.floor(walls.length / 2)];
        peers.push({
          engine,
          command,
          ok: r.why === undefined,
          why: r.why,
          result: r.result,
          sample_tokens_per_s: med ? (8 * base.newTokens) / med : undefined,
          peak_rss_mb: r.peak_rss_mb,
          wall_s: r.wall_s,
          load_average: r.load_average,
        });
        continue;
      }
      const args = [
        join(root, 'scripts', 'bench_step_peers.py'),
        engine,
        '--model',
        hf,
        '--items',
        itemsFile,
        '--threads',
        String(flags.threads),
        '--tmp',
        tmp,
      ];
      const command = `${peersPython} ${args.join(' ')}`;
      if (!existsSync(peersPython)) {
        peers.push({
          engine,
          command,
          ok: false,
          why: `${peersPython} not found (bash scripts/setup.sh --with-peers)`,
          peak_rss_mb: null,
          wall_s: 0,
          load_average: { before: load(), after: load() },
        });
        continue;
      }
      log(`${engine}: ${base.warmupItems} warm-up + ${base.items} timed items`);
      const r = runTimed(peersPython, args, env, log);
      peers.push({
        engine,
        command,
        ok: r.why === undefined,
        why: r.why,
        result: r.result,
        // The mean of the timed items, as magrpo's step_s: both sides update after the same items.
        s_per_item: (r.result?.mean_item_s as number | undefined) ?? null,
        peak_rss_mb: r.peak_rss_mb,
        wall_s: r.wall_s,
        load_average: r.load_average,
      });
      if (r.why) log(`${engine} failed: ${r.why}`);
    }
    const report: StepPeersReport = {
      kind: 'step-peers',
      command: `magrpo bench ${process.argv.slice(3).join(' ')}`.trim(),
      date: new Date().toISOString(),
      machine: {
        cpu: cpus()[0]?.model ?? 'unknown',
        logical_cpus: availableParallelism(),
        shared: process.env.MAGRPO_BENCH_MACHINE ?? 'shared with other jobs: see each run’s load average',
      },
      model: { given, hf_folder: hf === given ? given : `${given} converted to fp32 (magrpo convert)`, gguf },
      settings,
      items: items.map((it) => ({ index: it.index, prompt_tokens: it.ids.map((x) => x.length) })),
      skipped_items: skipped,
      magrpo,
      peers,
      llama: { batch: 8, prompt_tokens: 300, new_tokens: base.newTokens },
    };
    if (flags.out) writeFileSync(flags.out, `${JSON.stringify(report, null, 2)}\n`);
    process.stdout.write(flags.json ? `${JSON.stringify(report)}\n` : formatPeers(report));
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** magrpo's seconds per item without the reference's scoring (fluency metrics, which CoMLRL does not compute). */
export function magrpoWithoutReference(r: StepBenchReport): number {
  const ref = r.rows.filter((x) => x.phase.startsWith('score/')).reduce((a, x) => a + x.s, 0);
  return r.step_s - ref;
}

/**
 * Seconds per item in the steady state, one update per rollout_buffer_size items: everything but
 * the update per item, plus one update spread over its items. The timed items' mean (step_s) holds
 * as many updates as fell in them (1 warm-up + 3 timed items at buffer 2: 2 updates in 3 items).
 * CoMLRL's counterpart is scripts/bench_step_peers.py's s_per_item.
 */
export function magrpoSteady(r: StepBenchReport, bufferSize: number, agents: number): number {
  const items = r.item_s.length;
  const update = r.rows.filter((x) => x.phase.startsWith('update/')).reduce((a, x) => a + x.s * items, 0);
  const updates = (r.rows.find((x) => x.phase === 'update/optimizer')?.calls ?? 0) / agents;
  return r.step_s - update / items + (updates > 0 ? update / updates / bufferSize : 0);
}

export function formatPeers(r: StepPeersReport): string {
  const m = r.magrpo;
  const f = (x: number | null | undefined, d = 2) => (x === null || x === undefined ? '—' : x.toFixed(d));
  const rewards = (xs: unknown) => (Array.isArray(xs) ? xs.map((x) => (typeof x === 'number' ? x.toFixed(2) : '—')).join(', ') : '—');
  const lines = [
    `MAGRPO step and peers: ${r.model.given}; ${r.settings.agents} agents, G ${r.settings.group} × ${r.settings.newTokens} tokens, LoRA r ${r.settings.loraRank}, ${r.settings.threads} threads; ${r.settings.warmupItems} warm-up + ${r.settings.items} timed TL;DR items`,
    '',
    '| engine | s / item | × magrpo | reward means (warm-up, timed) | peak RSS | load avg before → after |',
    '| --- | --- | --- | --- | --- | --- |',
    `| magrpo | ${f(m.step_s)} (${f(magrpoWithoutReference(m))} without reference scoring) | 1.00 | ${rewards(m.reward_means)} | ${f((m.peak_rss_mb ?? 0) / 1024, 1)} GB | ${f(m.load_average.before[0], 1)} → ${f(m.load_average.after[0], 1)} |`,
  ];
  for (const p of r.peers) {
    if (!p.ok) {
      lines.push(`| ${p.engine} | could not run: ${p.why} | | | | |`);
      continue;
    }
    if (p.engine === 'llama.cpp') {
      lines.push(
        `| llama.cpp b8 sampling | ${f(p.sample_tokens_per_s, 0)} tokens/s | | | ${f((p.peak_rss_mb ?? 0) / 1024, 1)} GB | ${f(p.load_average.before[0], 1)} → ${f(p.load_average.after[0], 1)} |`,
      );
      continue;
    }
    const s = p.s_per_item ?? null;
    lines.push(
      `| ${p.engine}${p.engine === 'trl' ? ' (1 agent)' : ''} | ${f(s)} | ${s ? f(s / m.step_s) : '—'} | ${rewards(p.result?.reward_means)} | ${f((p.peak_rss_mb ?? 0) / 1024, 1)} GB | ${f(p.load_average.before[0], 1)} → ${f(p.load_average.after[0], 1)} |`,
    );
  }
  return `${lines.join('\n')}\n`;
}

/** Reads a record back (scripts/bench-report.mjs has its own reader; this is for tests and tools). */
export function readPeersReport(file: string): StepPeersReport {
  return JSON.parse(readFileSync(file, 'utf8')) as StepPeersReport;
}
