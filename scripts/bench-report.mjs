#!/usr/bin/env node
// Regenerates docs/benchmarks.md from the `magrpo bench --out` files under bench/results/, one
// section per machine class (one file per class: bench/results/<machine class>.json), then the
// `magrpo bench --step --out` files under bench/step/ as one section (one file per setup). The
// hand-written bench/engine-design.md (figures behind design choices) goes between the two.
//   node scripts/bench-report.mjs            rewrite docs/benchmarks.md
//   node scripts/bench-report.mjs --check    exit 1 when docs/benchmarks.md is out of date
//   --results <dir> --out <file>             other input folder / output file
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const arg = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? resolve(process.argv[i + 1]) : fallback;
};
const resultsDir = arg('--results', join(root, 'bench', 'results'));
const stepDir = arg('--step', join(root, 'bench', 'step'));
const target = arg('--out', join(root, 'docs', 'benchmarks.md'));

const f0 = (x) => (x >= 100 ? x.toFixed(0) : x.toFixed(1));
const pct = (x) => `${(100 * x).toFixed(100 * x < 10 ? 1 : 0)}%`;

/** One machine class's section. */
function section(file, r) {
  if (r.schema !== 2) throw new Error(`${file}: schema ${r.schema}, expected 2 (re-run magrpo bench --out)`);
  const d = r.doctor;
  const lines = [];
  const p = (s = '') => lines.push(s);
  p(`## ${r.machine.class}`);
  p();
  if (r.complete === false) p(`**Incomplete run**: it was stopped after ${Object.keys(r.sizes).join(', ') || 'no size'}; the other sizes were not measured.\n`);
  const busy = r.load_average.before[0] > 0.75 * r.machine.logical_cpus;
  if (busy) {
    p(
      `**Busy machine**: the load average was ${r.load_average.before[0].toFixed(1)} on ${r.machine.logical_cpus} CPUs, so every wall-clock figure below is depressed and noisy; engines alternate, so their ratios are less affected than the absolute numbers. Re-run on an idle machine to replace this section.\n`,
    );
  }
  p(
    `- **Date**: ${r.date.slice(0, 16).replace('T', ' ')} UTC; load average ${r.load_average.before.map((x) => x.toFixed(2)).join(' / ')} before, ${r.load_average.after.map((x) => x.toFixed(2)).join(' / ')} after`,
  );
  p(
    `- **CPU**: ${r.machine.cpu} (${d.cpu.vendor}${d.cpu.family !== null ? ` family ${d.cpu.family} model ${d.cpu.modelNumber}` : ''}), ${r.machine.logical_cpus} logical CPUs; ${r.machine.isa}`,
  );
  p(`- **BLAS**: ${r.machine.blas}; core **${r.machine.blas_core}** (${d.blas.selection})`);
  p(`- **System**: ${r.machine.os}, Node ${r.machine.node}`);
  p(
    `- **Command**: \`${r.command}\` (${r.threads} threads, ${r.rounds} rounds × ${r.repeats && r.repeats.max > r.repeats.min ? `${r.repeats.min}–${r.repeats.max} runs, more while under ${r.repeats.seconds} s` : `${r.reps} runs`}, medians); file \`bench/results/${file}\``,
  );
  p();
  if (d.fmaPeak) p(`Per-core FP32 peak, measured: **${f0(d.fmaPeak.gflops)} GFLOP/s** (FMA-throughput loop in ${d.fmaPeak.isa} vectors, one thread).`);
  p(
    `Per-core sgemm ceiling, measured: **${f0(d.peakPerCore.gflops)} GFLOP/s** (${d.peakPerCore.core}: ${d.peakPerCore.method})${d.fmaPeak ? `, ${pct(d.peakPerCore.gflops / d.fmaPeak.gflops)} of the FMA peak` : ''}.`,
  );
  if (d.fractionOfBest !== null) p(`Out of the box, sgemm runs at **${pct(d.fractionOfBest)}** of the best supported core.`);
  p();
  p(`| sgemm M×K×N | GFLOP/s 1 thread | % ceiling | GFLOP/s ${r.threads} threads | % ceiling |`);
  p('| --- | ---: | ---: | ---: | ---: |');
  for (const [shape, g] of Object.entries(r.matmul_gflops)) {
    const c = d.peakPerCore.gflops;
    p(`| ${shape} | ${f0(g[1])} | ${pct(g[1] / c)} | ${f0(g[r.threads])} | ${pct(g[r.threads] / (c * r.threads))} |`);
  }
  p();
  p('Engines:');
  p();
  const names = {};
  for (const e of r.engines) {
    names[e.id] = e.name;
    if (e.id === 'magrpo') {
      p(
        `- **magrpo**: ${Object.entries(e.settings)
          .map(([k, v]) => `${k}=${v}`)
          .join(', ')}`,
      );
    } else if (e.runnable && e.id === 'llama.cpp') {
      const settings = [...new Set(e.variants.map((v) => v.replace(/^f(32|16) weights,? ?/, '') || 'its defaults'))];
      p(
        `- **${e.name}**: \`${e.python}\`, sampling only, on the bench models written as GGUF by magrpo (f32 and f16 weights, a row each); n_threads = n_threads_batch = ${r.threads}, otherwise llama.cpp's defaults; ${settings.length > 1 ? `best per figure of ${settings.join(' / ')}` : settings[0]}; draws from softmax(logits) with numpy, without the full-vocabulary log-probs magrpo computes`,
      );
    } else if (e.runnable) {
      p(
        `- **${e.name}**: \`${e.python}\`, torch.set_num_threads(${r.threads}), otherwise PyTorch's defaults; ${e.variants.length > 1 ? `best per figure of ${e.variants.join(' / ')}` : e.variants[0]}`,
      );
    } else {
      p(`- ${e.name}: ${e.why}`);
    }
  }
  p();
  p(
    'Tokens/s (median); in parentheses the share of the sgemm limit: FLOPs per token × tokens/s ÷ ' +
      `${f0(r.sgemm_limit_gflops)} GFLOP/s (${r.sgemm_limit}). Peer rows end with magrpo ÷ peer; half-precision rows (llama.cpp f16, PyTorch bf16 autocast) with magrpo in \`precision: bf16\` ÷ peer, marked (bf16).`,
  );
  p();
  p('| size | engine | train | sample b8 | sample b32 | peak RSS MB |');
  p('| --- | --- | ---: | ---: | ---: | ---: |');
  for (const [size, s] of Object.entries(r.sizes)) {
    const cell = (tps, flops, ours) => {
      const share = (tps * flops) / (r.sgemm_limit_gflops * 1e9);
      return `${tps.toFixed(0)} (${pct(share)})${ours === undefined ? '' : ` **${(ours / tps).toFixed(2)}×**`}`;
    };
    const cells = (t, ref) => [
      cell(t.train_tokens_per_s, s.flops_per_token.train, ref?.train_tokens_per_s),
      ...['8', '32'].map((b) => cell(t.sample_tokens_per_s[b], s.flops_per_token.sample, ref?.sample_tokens_per_s[b])),
      t.peak_rss_mb.toFixed(0),
    ];
    p(`| ${size} | magrpo | ${cells(s.magrpo).join(' | ')} |`);
    const bf16 = s.magrpo.train_bf16_tokens_per_s;
    const bf16Sample = s.magrpo.sample_bf16_tokens_per_s;
    if (bf16 !== undefined || bf16Sample !== undefined) {
      const vsFp32 = (x, fp32, flops) =>
        x === undefined ? '—' : `${x.toFixed(0)} (${pct((x * flops) / (r.sgemm_limit_gflops * 1e9))}) ${(x / fp32).toFixed(2)}× fp32`;
      const train = vsFp32(bf16, s.magrpo.train_tokens_per_s, s.flops_per_token.train);
      const sample = ['8', '32'].map((b) => vsFp32(bf16Sample?.[b], s.magrpo.sample_tokens_per_s[b], s.flops_per_token.sample));
      p(`| | magrpo, \`precision: bf16\` | ${train} | ${sample.join(' | ')} | |`);
    }
    for (const [id, t] of Object.entries(s.peers)) p(`| | ${names[id] ?? id} | ${cells(t, s.magrpo).join(' | ')} |`);
    // PyTorch's mixed precision (torch.autocast bf16) against ours with precision bf16, where measured.
    for (const [id, t] of Object.entries(s.peers)) {
      if (t.train_bf16_tokens_per_s === undefined) continue;
      p(
        `| | ${names[id] ?? id}, bf16 autocast | ${cell(t.train_bf16_tokens_per_s, s.flops_per_token.train, bf16)}${bf16 === undefined ? '' : ' (bf16)'} | — | — | |`,
      );
    }
    // Sample-only peers (llama.cpp): a row per weight type, no training.
    for (const t of Object.values(s.sample_peers ?? {})) {
      // Half-precision weights against ours with precision bf16 (bf16 weight packs), where measured.
      const half = t.weights !== 'f32' && bf16Sample !== undefined;
      const sample = ['8', '32'].map(
        (b) => cell(t.sample_tokens_per_s[b], s.flops_per_token.sample, (half ? bf16Sample : s.magrpo.sample_tokens_per_s)[b]) + (half ? ' (bf16)' : ''),
      );
      p(`| | ${t.engine} ${t.weights} weights | — | ${sample.join(' | ')} | ${t.peak_rss_mb.toFixed(0)} |`);
    }
    for (const [id, why] of Object.entries(s.peers_not_run ?? {})) p(`| | ${names[id] ?? id} | could not run this size: ${why} | | | |`);
  }
  p();
  loraTable(r, names, p);
  for (const [size, s] of Object.entries(r.sizes)) {
    const best = Object.entries(s.peers)
      .filter(([, t]) => Object.keys(t.variants).length > 1)
      .map(([id, t]) => {
        const lora = t.best_variant.train_lora ? `${t.best_variant.train_lora} (LoRA), ` : '';
        return `${names[id]} best with ${t.best_variant.train} (train), ${lora}${Object.entries(t.best_variant.sample)
          .map(([b, v]) => `${v} (b${b})`)
          .join(', ')}`;
      });
    const batch = s.train_batch !== undefined && s.train_batch !== 8 ? `, training on ${s.train_batch} × 128 tokens` : '';
    p(`- ${size}: ${s.model}, ${(s.params / 1e6).toFixed(2)}M parameters${batch}${best.length ? `; ${best.join('; ')}` : ''}`);
    const bt = s.best_training;
    if (bt)
      p(
        `  - training, each side at its faster precision: magrpo ${bt.magrpo.tokens_per_s.toFixed(0)} (${bt.magrpo.precision}) ÷ ${names[bt.peer.engine] ?? bt.peer.engine} ${bt.peer.tokens_per_s.toFixed(0)} (${bt.peer.precision}) = **${bt.ratio.toFixed(2)}×**`,
      );
    // Every setting tried, the first being the peer as installed (its defaults).
    for (const [id, t] of Object.entries(s.peers)) {
      if (Object.keys(t.variants).length < 2) continue;
      const each = Object.entries(t.variants).map(
        ([label, v]) =>
          `${label}: train ${v.train_tokens_per_s.toFixed(0)}${v.train_bf16_tokens_per_s === undefined ? '' : `, train bf16 ${v.train_bf16_tokens_per_s.toFixed(0)}`}, ${Object.entries(
            v.sample_tokens_per_s,
          )
            .map(([b, x]) => `b${b} ${x.toFixed(0)}`)
            .join(', ')}`,
      );
      p(`  - ${names[id] ?? id}, each setting (tokens/s): ${each.join('; ')}`);
    }
    for (const t of Object.values(s.sample_peers ?? {})) {
      const each = Object.entries(t.variants).map(
        ([label, v]) =>
          `${label}: ${Object.entries(v.sample_tokens_per_s)
            .map(([b, x]) => `b${b} ${x.toFixed(0)}`)
            .join(', ')}`,
      );
      p(`  - ${names[t.engine] ?? t.engine}, each setting (tokens/s): ${each.join('; ')}`);
    }
  }
  p();
  return lines.join('\n');
}

/**
 * Sizes with LoRA figures (500m): LoRA (rank 16, every linear layer, base frozen) next to full
 * fine-tuning, and the peak RSS after sampling, after LoRA training and after full fine-tuning.
 */
function loraTable(r, names, p) {
  const sizes = Object.entries(r.sizes).filter(([, s]) => s.magrpo.train_lora_tokens_per_s !== undefined);
  if (sizes.length === 0) return;
  p('LoRA and full fine-tuning (tokens/s; LoRA: rank 16 on every linear layer, base frozen, AdamW over the adapters only):');
  p();
  p('| size | engine | train (LoRA r16) | train (full) | peak RSS MB: sampling / + LoRA / + full |');
  p('| --- | --- | ---: | ---: | ---: |');
  for (const [size, s] of sizes) {
    const cell = (tps, flops, ours) => {
      if (tps === undefined) return '-';
      const share = flops === undefined ? '' : ` (${pct((tps * flops) / (r.sgemm_limit_gflops * 1e9))})`;
      return `${tps.toFixed(0)}${share}${ours === undefined ? '' : ` **${(ours / tps).toFixed(2)}×**`}`;
    };
    const rss = (t) => ['sample', 'lora', 'full'].map((k) => (t.rss_mb?.[k] === undefined ? '-' : t.rss_mb[k].toFixed(0))).join(' / ');
    const cells = (t, ref) => [
      cell(t.train_lora_tokens_per_s, s.flops_per_token.train_lora, ref?.train_lora_tokens_per_s),
      cell(t.train_tokens_per_s, s.flops_per_token.train, ref?.train_tokens_per_s),
      rss(t),
    ];
    p(`| ${size} | magrpo | ${cells(s.magrpo).join(' | ')} |`);
    for (const [id, t] of Object.entries(s.peers)) p(`| | ${names[id] ?? id} | ${cells(t, s.magrpo).join(' | ')} |`);
  }
  p();
}

/**
 * The step profiles of bench/step/ (`magrpo bench --step --out`): seconds per item of each phase,
 * one column per file, then each file's split between kernels and the JS around them, then the
 * hand-written bench/step/notes.md (what the runs show, how they were taken).
 */
function stepSection(runs) {
  const lines = [];
  const p = (x = '') => lines.push(x);
  const s2 = (x) => x.toFixed(2);
  p('## MAGRPO step on a 135M model');
  p();
  p(
    "Where the time of one training item goes (`magrpo bench --step`, src/bench/step.ts): the trainer's own step on SmolLM2-135M-Instruct's " +
      'shape with random weights (or `--model <folder or .gguf>`), 2 agents, LoRA r 16 on all seven projections, G = 4 completions of 64 new ' +
      "tokens per agent, prompts of 400 tokens, rollout_buffer_size 2 (an update every second item), fluency metrics on (each agent's frozen " +
      'reference copy scores its completions), the default sampling settings; 2 warm-up items, then 2 timed. Seconds per item; "outside kernels" is ' +
      'the JS, allocation and GC around them; "other" is the rest of the step (reward, fluency metrics, tokenizer, bookkeeping). ' +
      'Files in bench/step/, one per setup (`magrpo bench --step --out bench/step/<name>.json`).',
  );
  p();
  const phases = [...new Set(runs.flatMap(([, r]) => r.rows.map((x) => x.phase)))];
  p(`| phase | ${runs.map(([name]) => name).join(' | ')} |`);
  p(`| --- | ${runs.map(() => '---').join(' | ')} |`);
  for (const ph of phases) {
    const cell = (r) => {
      const x = r.rows.find((y) => y.phase === ph);
      return x ? `${s2(x.s)} (${pct(x.share)})` : '—';
    };
    p(`| ${ph === 'step' ? '**step**' : ph} | ${runs.map(([, r]) => cell(r)).join(' | ')} |`);
  }
  const rss = (r) => (r.peak_rss_mb === null ? '—' : `${(r.peak_rss_mb / 1024).toFixed(1)} GB`);
  p(`| peak RSS | ${runs.map(([, r]) => rss(r)).join(' | ')} |`);
  p();
  for (const [name, r] of runs) {
    const s = r.settings;
    const split = r.rows.map((x) => `${x.phase} ${s2(x.kernel_s)} + ${s2(x.outside_s)}`).join('; ');
    p(
      `- ${name}: \`${r.command}\`${s.shared_prefill === false ? ' with MAGRPO_SHARED_PREFILL=0' : ''}${s.team_decode === false ? ' with MAGRPO_TEAM_DECODE=0' : ''}, ${r.date.slice(0, 16).replace('T', ' ')}, ${r.machine.cpu}, ` +
        `${s.threads} thread(s), load average ${r.load_average.before[0].toFixed(1)} → ${r.load_average.after[0].toFixed(1)}; ${s.model ?? s.shape}, ` +
        `${(s.params / 1e6).toFixed(1)} M parameters; items ${r.item_s.map(s2).join(', ')} s${r.item_cpu_s ? ` (CPU ${r.item_cpu_s.map(s2).join(', ')} s)` : ''}; ${r.tokens.completion.toFixed(0)} completion tokens per item. ` +
        `In kernels + outside (s per item): ${split}.`,
    );
  }
  const notes = join(stepDir, 'notes.md');
  if (existsSync(notes)) p(`\n${readFileSync(notes, 'utf8').trim()}`);
  return `${lines.join('\n')}\n`;
}

/**
 * The step next to its peers, from bench/step/peers/ (`magrpo bench --step --peers --out`): per
 * file one table (magrpo, CoMLRL, TRL, llama.cpp sampling), then what each side ran with, then the
 * hand-written bench/step/peers/notes.md.
 */
function peersSection(runs) {
  const lines = [];
  const p = (x = '') => lines.push(x);
  const s2 = (x) => (typeof x === 'number' ? x.toFixed(2) : '—');
  const gb = (mb) => (typeof mb === 'number' ? `${(mb / 1024).toFixed(1)} GB` : '—');
  const la = (l) => `${l.before[0].toFixed(1)} → ${l.after[0].toFixed(1)}`;
  const rewards = (xs) => (Array.isArray(xs) && xs.length ? xs.map((x) => (typeof x === 'number' ? x.toFixed(2) : '—')).join(', ') : '—');
  p('## MAGRPO step next to CoMLRL, TRL and llama.cpp');
  p();
  p(
    '`magrpo bench --step --peers --model <gguf>` (src/bench/step-peers.ts, scripts/bench_step_peers.py): the same TL;DR items, reward, model and ' +
      'settings on magrpo and on its peers, one after the other on the same machine, each peer in its own process under `/usr/bin/time -v` ' +
      '(peak RSS). Files in bench/step/peers/; what each side ran with and what CoMLRL does differently below the tables. Seconds per item: ' +
      'magrpo and CoMLRL per MAGRPO item (2 agents × G 4 × 64 tokens, an update after every second item: the mean of the 3 timed items ' +
      'holds 2 updates, the steady state 1 per 2 items); TRL per GRPO step of one agent (G 4 × 64 tokens, an update every step). ' +
      '"peer ÷ magrpo" is a ratio of times (above 1: magrpo is faster); for llama.cpp, of the time per sampled token. Reward means: ' +
      "each item's mean joint reward (magrpo's TL;DR reward on both MAGRPO sides), the first item the warm-up; TRL's is the one-agent structure level.",
  );
  for (const [name, r] of runs) {
    const m = r.magrpo;
    const ref = m.rows.filter((x) => x.phase.startsWith('score/')).reduce((a, x) => a + x.s, 0);
    const sampling = m.rows.filter((x) => x.phase.startsWith('sample/')).reduce((a, x) => a + x.s, 0);
    // Steady state: everything but the update per item, plus one update per rollout_buffer_size items.
    const n = m.item_s.length;
    const update = m.rows.filter((x) => x.phase.startsWith('update/')).reduce((a, x) => a + x.s * n, 0);
    const updates = (m.rows.find((x) => x.phase === 'update/optimizer')?.calls ?? 0) / r.settings.agents;
    const steady = m.step_s - update / n + (updates > 0 ? update / updates / r.settings.bufferSize : 0);
    p();
    p(`### ${name}`);
    p();
    p(
      '| engine | s / item: mean of the timed items | steady state: 1 update per 2 items | peer ÷ magrpo (steady) | reward means | peak RSS | load average before → after |',
    );
    p('| --- | --- | --- | --- | --- | --- | --- |');
    p(
      `| magrpo | ${s2(m.step_s)} | ${s2(steady)} (${s2(steady - ref)} without the reference's scoring) | 1.00 | ${rewards(m.reward_means)} | ${gb(m.peak_rss_mb)} | ${la(m.load_average)} |`,
    );
    for (const q of r.peers) {
      if (!q.ok) {
        p(`| ${q.engine} | could not run: ${q.why} | | | | | ${la(q.load_average)} |`);
        continue;
      }
      if (q.engine === 'llama.cpp') {
        const ours = m.tokens.completion / sampling;
        p(
          `| llama.cpp sampling, batch 8 | ${q.sample_tokens_per_s.toFixed(0)} tokens/s | magrpo's step samples ${ours.toFixed(0)} tokens/s | ${(ours / q.sample_tokens_per_s).toFixed(2)} | | ${gb(q.peak_rss_mb)} | ${la(q.load_average)} |`,
        );
        continue;
      }
      const x = q.result;
      // CoMLRL: s_per_item is its steady state (median sampling + reward + median update / 2); TRL: every step updates.
      const st = q.engine === 'comlrl' ? x.s_per_item : x.mean_item_s;
      const label = q.engine === 'comlrl' ? `CoMLRL ${x.versions.comlrl}` : `TRL ${x.versions.trl} GRPOTrainer, 1 agent (s / step)`;
      p(
        `| ${label} | ${s2(x.mean_item_s)} | ${s2(st)} | ${typeof st === 'number' ? s2(st / steady) : '—'} | ${rewards(x.reward_means)} | ${gb(q.peak_rss_mb)} | ${la(q.load_average)} |`,
      );
    }
    p();
    const s = r.settings;
    p(
      `- magrpo: \`${r.command}\`, ${r.date.slice(0, 16).replace('T', ' ')}, ${r.machine.cpu}, ${r.machine.logical_cpus} logical CPUs (${r.machine.shared}); ` +
        `${s.threads} threads, fp32, LoRA r ${s.loraRank} (alpha ${2 * s.loraRank}) on all seven projections, chat prompts of ${r.items.map((it) => it.prompt_tokens.join('/')).join(', ')} tokens ` +
        `(TL;DR training items ${r.items.map((it) => it.index).join(', ')}), temperature ${s.temperature}, top-p ${s.top_p}, top-k ${s.top_k}, learning rate ${s.learning_rate}; ` +
        `items ${m.item_s.map(s2).join(', ')} s; phases (s per item) ${m.rows.map((x) => `${x.phase} ${s2(x.s)}`).join(', ')}.`,
    );
    for (const q of r.peers.filter((x) => x.ok)) {
      const v = q.result.versions ?? {};
      if (q.engine === 'llama.cpp') {
        const st = q.result.settings;
        p(
          `- llama.cpp: llama-cpp-python ${q.result.llama_cpp_version}, ${st.model}, n_threads ${st.threads}, use_extra_bufts ${st.use_extra_bufts}, ` +
            `batch ${r.llama.batch} × ${r.llama.new_tokens} new tokens after ` +
            (st.contexts['8']?.shared_prompt
              ? `one prompt of ${r.llama.prompt_tokens} random tokens, prefilled once and copied to the ${r.llama.batch} sequences`
              : `${r.llama.batch} prompts of ${r.llama.prompt_tokens} random tokens, each prefilled`) +
            `, no LoRA; wall ${q.result.sample['8'].wall.map(s2).join(', ')} s.`,
        );
        continue;
      }
      const st = q.result.settings;
      const per =
        q.engine === 'comlrl'
          ? `items ${q.result.item_s.map(s2).join(', ')} s (sampling median ${s2(q.result.sample_s_median)} s, updates ${q.result.update_s_per_update.map(s2).join(', ')} s)`
          : `steps ${q.result.step_s.map(s2).join(', ')} s`;
      p(
        `- ${q.engine}: torch ${v.torch}, transformers ${v.transformers}, peft ${v.peft}${v.trl ? `, trl ${v.trl}` : ''}${v.comlrl ? `, comlrl ${v.comlrl}` : ''}; ` +
          `${st.torch_num_threads} torch threads, ${st.dtype}, LoRA r ${st.lora.r} (alpha ${st.lora.alpha}, dropout 0) on ${st.lora.target_modules.length} projections; ${per}; ` +
          `${(q.result.notes ?? []).join('; ') || 'no changes to its defaults beyond the settings above'}.`,
      );
    }
  }
  const notes = join(peersDir, 'notes.md');
  if (existsSync(notes)) p(`\n${readFileSync(notes, 'utf8').trim()}`);
  return `${lines.join('\n')}\n`;
}

const files = existsSync(resultsDir)
  ? readdirSync(resultsDir)
      .filter((f) => f.endsWith('.json'))
      .sort()
  : [];
const head = `# Benchmarks

Generated by \`node scripts/bench-report.mjs\` from \`bench/results/*.json\` (one file per machine
class, written by \`magrpo bench --out bench/results/<machine class>.json\`); do not edit by hand.
To add or refresh a machine: run \`magrpo bench --threads 2 --out bench/results/<class>.json\` on an idle machine
(\`magrpo bench --json\` prints the class as \`machine.class\`), then this script.

What is measured: \`magrpo doctor\` first (OpenBLAS core, measured sgemm ceiling), then training
(forward + backward + AdamW on 8 × 128 tokens, after untimed warm-up steps: at least 2, then up to
100 within 8 s, for every engine alike — results recorded before 2026-11-27 09:40 had at most 5,
which at 1m timed the first steps' heap growth, ~15% slower than the steady state) and sampling
(64 new tokens after a 16-token prompt, KV cache, temperature 1, after untimed warm-up runs: at
least 1, then up to 50 within 2 s, for every engine alike — results recorded before 2026-11-27 17:35
had one, which at 1m timed magrpo's JIT settling, 2–3× slower than the steady state) of three model
shapes with random weights, for magrpo and every peer found (PyTorch from Debian and from PyPI,
llama.cpp). Where the CPU has AVX-512 BF16, training is also timed in bf16: magrpo's
\`precision: bf16\` against PyTorch's \`torch.autocast("cpu", torch.bfloat16)\` (both keep fp32
weights, gradients and AdamW; results recorded before 2026-11-27 17:35 have no PyTorch bf16 row),
and each size gives training with each side at its faster precision. Each figure is the median of
2 rounds (engines alternating) of at least 3 timed calls, then more, up to 30, while under 3 s
(results recorded before 2026-11-27 18:20 had 3: at 10m one step varies by ±10%). Whole runs vary
too: three on the Zen 5 on 2026-11-27 gave Debian PyTorch's 10m training 4,293, 3,737 and 4,251
tokens/s and magrpo's fp32 6,146, 6,259 and 6,262, so 1.43×, 1.67× and 1.47× (the first began right
after a demo run, load 1.7; the others on an idle machine; the last with PyTorch dropping its
gradients); one two hours later, with the host slower for both sides (sgemm ceiling 218 GFLOP/s
against 227), gave 3,645 and 5,566: 1.53×. A ratio near its target can land on either side. A run
taken while another process used the CPU is worthless: one on 2026-11-28 that overlapped a
compile and a short test run gave magrpo's 1m training 23,035 tokens/s against 40,000–46,000 idle.
Peers run with their own defaults and, where a setting matters, their best of the settings tried.
Both sides' training steps drop their gradients rather than zero-fill them (PyTorch's
\`zero_grad(set_to_none=True)\`, its fastest; magrpo's \`zeroGrad()\` does the same since
2026-11-28 02:34) — results recorded before 2026-11-27 22:30 had PyTorch zero-fill them too. llama.cpp samples only: each size is written as
GGUF by magrpo's exporter (random weights, F32 and F16 matrices, a row each; 124m as llama.cpp's
\`gpt2\` architecture, the others as \`llama\` / \`qwen2\`) and run through llama-cpp-python's
batch API (\`scripts/bench_llama.py\`). Results recorded before the exporter wrote GPT-2 show
124m's llama.cpp row as "could not run this size". magrpo's training step recycles its activation
buffers from step to step (\`src/engine/buffer-pool.ts\`), as its learner and pretraining do;
results recorded before 2026-11-27 14:30 allocated them afresh every step.

A fourth size is opt-in: \`--sizes 1m,10m,124m,500m\` adds \`500m\`, Qwen2.5-0.5B's shapes (494M
parameters, q/k/v biases, tied embeddings, random weights), with LoRA training (rank 16 on q, k, v,
o, gate, up and down; base frozen, AdamW over the adapters only; PyTorch's LoRA is written by hand
in \`scripts/bench_torch.py\` so both engines do the same arithmetic) next to full fine-tuning, both
on 4 × 128 tokens (fp32 full fine-tuning with AdamW holds ~8 GB of weights, gradients and moments),
and the peak RSS after sampling, after LoRA and after full fine-tuning. It needs 10–12 GB of RAM
per engine and minutes per engine on two cores.
`;
const body = files.map((f) => section(f, JSON.parse(readFileSync(join(resultsDir, f), 'utf8'))));
const stepFiles = existsSync(stepDir)
  ? readdirSync(stepDir)
      .filter((f) => f.endsWith('.json'))
      .sort()
  : [];
const steps = stepFiles.length ? [stepSection(stepFiles.map((f) => [f.replace(/\.json$/, ''), JSON.parse(readFileSync(join(stepDir, f), 'utf8'))]))] : [];
const peersDir = join(stepDir, 'peers');
const peerFiles = existsSync(peersDir)
  ? readdirSync(peersDir)
      .filter((f) => f.endsWith('.json'))
      .sort()
  : [];
if (peerFiles.length) steps.push(peersSection(peerFiles.map((f) => [f.replace(/\.json$/, ''), JSON.parse(readFileSync(join(peersDir, f), 'utf8'))])));
const designFile = join(dirname(resultsDir), 'engine-design.md');
const design = existsSync(designFile) ? [readFileSync(designFile, 'utf8')] : [];
const text = `${[head, ...(body.length ? body : ['No results yet.\n']), ...design, ...steps].join('\n')}`.replace(/\n+$/, '\n');
if (process.argv.includes('--check')) {
  const now = existsSync(target) ? readFileSync(target, 'utf8') : '';
  if (now !== text) {
    console.error('docs/benchmarks.md is out of date: run node scripts/bench-report.mjs');
    process.exit(1);
  }
} else {
  writeFileSync(target, text);
  console.log(`wrote ${target} (${files.length} machine class(es))`);
}
