/**
 * The README's result tables, built from committed result files only (results/<demo>/seed-*.json,
 * written by `magrpo demo --record results/<demo>`): mean and min–max over seeds, the machines
 * and commits they came from, and verbatim completions. A test checks the README matches.
 *
 *   npx tsx scripts/readme-results.ts          rewrite the README sections
 *   npx tsx scripts/readme-results.ts --check  exit 1 if the README differs from the files
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

interface Row {
  method: string;
  metrics: Record<string, number>;
  examples?: string[][];
}
interface Result {
  env: string;
  seed: number;
  wall_s: number;
  overrides: string[];
  machine: Record<string, string | number>;
  rows: Row[];
  /** Anything a reader must know about how this record was made. */
  note?: string;
  /** Per agent metric (`agent_0/word_validity`, …): mean of the first and last tenth of training. */
  training_fluency?: Record<string, { first: number; last: number }>;
}

/** The writing demos' columns (metric key → header). */
const WRITING_COLUMNS: [string, string][] = [
  ['return', 'return'],
  ['structure', 'structure'],
  ['coherence', 'coherence'],
  ['consistency', 'consistency'],
  ['word_validity', 'word validity'],
  ['ref_nll', 'ref NLL'],
];

/** The writing demo's columns since words per clause was measured (older result sets lack it). */
const WRITING_COLUMNS_CLAUSES: [string, string][] = [...WRITING_COLUMNS, ['clause_length', 'words/clause']];

/** The writing demo's columns since grammar validity was measured. */
const WRITING_COLUMNS_GRAMMAR: [string, string][] = [...WRITING_COLUMNS, ['grammar_validity', 'grammar'], ['clause_length', 'words/clause']];

/** The coding demos' columns. */
const CODING_COLUMNS: [string, string][] = [
  ['return', 'return'],
  ['syntax', 'syntax'],
  ['tests', 'tests'],
  ['cooperation', 'cooperation'],
  ['pass@1', 'pass@1'],
  ['ref_nll', 'ref NLL'],
];

/** The real-model writing demo's columns: what the reward does not see (faithfulness, copying, echo). */
export const FAITHFULNESS_COLUMNS: [string, string][] = [
  ['return', 'return'],
  ['structure', 'structure'],
  ['coherence', 'coherence'],
  ['consistency', 'consistency'],
  ['content_support/agent_0', 'support a0'],
  ['content_support/agent_1', 'support a1'],
  ['rouge_l/agent_0', 'ROUGE-L a0'],
  ['copied_8/agent_0', 'copied a0'],
  ['copied_8/agent_1', 'copied a1'],
  ['echo', 'echo'],
  ['ref_nll/agent_0', 'ref NLL a0'],
  ['ref_nll/agent_1', 'ref NLL a1'],
  ['words/agent_0', 'words a0'],
  ['words/agent_1', 'words a1'],
];

const FAITHFULNESS_LEGEND =
  "Support is the share (%) of an answer's content words found in its post, ROUGE-L the longest word sequence it shares in order with the post over its own length (%), copied the share (%) of its words inside 8-word runs copied from the post, echo the ROUGE-L F1 (%) between the two agents' answers, ref NLL the mean per-token NLL under the untrained model, words the mean word count; a0 is the concise writer, a1 the detailed one. Agent 0's support and copying enter its training reward (the faithfulness guard), and the reference KL keeps both agents near the untrained model (ref NLL); ROUGE-L and echo no training signal sees. ";

/**
 * Each README section: its result folder, the columns it shows (metric key → header), a legend
 * replacing the default one, whether to list the trained pair's lead over the best baseline seed
 * by seed, and how many eval items to quote verbatim (default: all recorded).
 */
export const SECTIONS: Record<string, { dir: string; columns: [string, string][]; legend?: string; leads?: boolean; examples?: number }> = {
  'demo-tldr-smollm2': {
    dir: 'results/demo-tldr-smollm2',
    columns: FAITHFULNESS_COLUMNS,
    legend: FAITHFULNESS_LEGEND,
    leads: true,
    examples: 6,
  },
  'demo-tldr': {
    dir: 'results/demo-tldr',
    columns: WRITING_COLUMNS_GRAMMAR,
  },
  'demo-tldr-nogrammar': {
    dir: 'results/demo-tldr-nogrammar',
    columns: WRITING_COLUMNS_CLAUSES,
  },
  'demo-tldr-clause35': {
    dir: 'results/demo-tldr-clause35',
    columns: WRITING_COLUMNS_CLAUSES,
  },
  'demo-tldr-noclause': {
    dir: 'results/demo-tldr-noclause',
    columns: WRITING_COLUMNS,
  },
  'demo-tldr-instruct': {
    dir: 'results/demo-tldr-instruct',
    columns: WRITING_COLUMNS,
  },
  'demo-tldr-small': {
    dir: 'results/demo-tldr-small',
    columns: WRITING_COLUMNS,
  },
  'demo-tldr-unguarded': {
    dir: 'results/demo-tldr-unguarded',
    columns: WRITING_COLUMNS,
  },
  'demo-tldr-softguard': {
    dir: 'results/demo-tldr-softguard',
    columns: WRITING_COLUMNS,
  },
  'demo-tldr-d2guard': {
    dir: 'results/demo-tldr-d2guard',
    columns: WRITING_COLUMNS,
  },
  'demo-coop-python': {
    dir: 'results/demo-coop-python',
    columns: CODING_COLUMNS,
  },
  'demo-coop-python-base': {
    dir: 'results/demo-coop-python-base',
    columns: CODING_COLUMNS,
  },
};

export function loadResults(dir: string): Result[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => /^seed-\d+\.json$/.test(f))
    .map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')) as Result)
    .sort((a, b) => a.seed - b.seed);
}

const fmt = (x: number) => (Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(2));

/** The markdown of one section, from its result files. */
export function renderSection(name: string, root = '.'): string {
  const spec = SECTIONS[name];
  const results = loadResults(join(root, spec.dir));
  if (results.length === 0) return `_No result files in \`${spec.dir}\` yet._`;
  const methods = [...new Set(results.flatMap((r) => r.rows.map((x) => x.method)))];
  const lines = [`| method | ${spec.columns.map(([, h]) => h).join(' | ')} |`, `| --- |${' --- |'.repeat(spec.columns.length)}`];
  const best = Math.max(...methods.map((m) => meanOf(results, m, 'return') ?? Number.NEGATIVE_INFINITY));
  for (const m of methods) {
    const cells = spec.columns.map(([key]) => {
      const v = results.flatMap((r) => {
        const x = r.rows.find((row) => row.method === m)?.metrics[key];
        return x === undefined ? [] : [x];
      });
      if (v.length === 0) return '-';
      const mean = v.reduce((a, b) => a + b, 0) / v.length;
      const cell = v.length > 1 ? `${fmt(mean)} (${fmt(Math.min(...v))}–${fmt(Math.max(...v))})` : fmt(mean);
      return key === 'return' && mean === best ? `**${cell}**` : cell;
    });
    lines.push(`| ${m} | ${cells.join(' | ')} |`);
  }
  const seeds = results.map((r) => r.seed).join(', ');
  const machines = [
    ...new Set(results.map((r) => `${r.machine.cpu} (${r.machine.isa}; OpenBLAS core ${r.machine.blas_core}, ${r.machine.threads} thread(s))`)),
  ];
  const commits = [...new Set(results.map((r) => r.machine.commit))].join(', ');
  const wall = results.map((r) => r.wall_s / 60);
  const overrides = [...new Set(results.flatMap((r) => r.overrides))];
  lines.push(
    '',
    `Mean over seeds ${seeds}, with min–max in brackets; the best return is bold. ${spec.legend ?? defaultLegend(spec.columns)}` +
      `Measured on ${machines.join('; ')} at commit ${commits}; each seed took ${fmt(Math.min(...wall))}–${fmt(Math.max(...wall))} min. ` +
      (overrides.length ? `Overrides: \`${overrides.join(' ')}\`. ` : '') +
      `Generated by \`npx tsx scripts/readme-results.ts\` from \`${spec.dir}/\`.`,
  );
  if (spec.leads) lines.push('', `The trained pair's return minus the best baseline's, seed by seed: ${leads(results).join('; ')}.`);
  const drift = results.filter((r) => r.training_fluency && Object.keys(r.training_fluency).some((k) => k.endsWith('/word_validity')));
  if (drift.length) {
    lines.push('', 'Word validity of each agent in training (% of letters in real words; first → last tenth of the run):', '');
    for (const r of drift) {
      const tf = r.training_fluency as NonNullable<Result['training_fluency']>;
      const agents = Object.keys(tf)
        .filter((k) => k.endsWith('/word_validity'))
        .sort()
        .map((k) => {
          const agent = k.split('/')[0];
          const clauses = tf[`${agent}/clause_length`];
          const grammar = tf[`${agent}/grammar_validity`];
          const words =
            (grammar ? ` (grammar ${fmt(100 * grammar.first)} → ${fmt(100 * grammar.last)}` : '') +
            (clauses ? `${grammar ? ',' : ' ('} words/clause ${fmt(clauses.first)} → ${fmt(clauses.last)})` : grammar ? ')' : '');
          return `${agent.replace('_', ' ')} ${fmt(100 * tf[k].first)} → ${fmt(100 * tf[k].last)}${words}`;
        });
      lines.push(`- seed ${r.seed}: ${agents.join(', ')}`);
    }
  }
  for (const r of results.filter((x) => x.note)) lines.push('', `Seed ${r.seed}: ${r.note}.`);
  // Verbatim completions from the first seed that recorded them.
  const first = results.find((r) => r.rows.some((x) => x.examples?.length));
  for (const method of ['trained pair (MAGRPO)', 'untrained pair']) {
    const row = first?.rows.find((r) => r.method === method);
    if (!first || !row?.examples?.length) continue;
    const quoted = row.examples.slice(0, spec.examples);
    lines.push(
      '',
      `${method === 'untrained pair' ? 'The untrained pair' : 'The trained pair'}, seed ${first.seed}, first ${quoted.length} eval items, verbatim:`,
      '',
      '```text',
    );
    for (const [k, ex] of quoted.entries()) {
      for (const [i, c] of ex.entries()) lines.push(`[item ${k + 1}, agent ${i}] ${c.trim().replace(/\s*\n\s*/g, ' ⏎ ')}`);
    }
    lines.push('```');
  }
  return lines.join('\n');
}

/** What the columns of the older demo sections mean. */
function defaultLegend(columns: [string, string][]): string {
  const has = (key: string) => columns.some(([k]) => k === key);
  if (!has('word_validity')) return 'Ref NLL is the mean per-token NLL of the completions under the untrained model. ';
  return `Word validity is the weakest agent's share (%) of letters in real words, ref NLL its mean per-token NLL under the untrained model (lower is more natural text)${
    has('grammar_validity') ? ', grammar its share (%) of function-word trigrams found in English prose (TL;DR posts: 96.7)' : ''
  }${has('clause_length') ? ', words/clause its mean words between punctuation marks (lists of fragments: 2–3; TL;DR posts: 6.8)' : ''}. `;
}

/** Per seed: the trained pair's return minus the best other method's (the untrained pair included), and which that was. */
function leads(results: Result[]): string[] {
  return results.map((r) => {
    const trained = r.rows.find((x) => x.method === 'trained pair (MAGRPO)')?.metrics.return;
    const others = r.rows.filter((x) => x.method !== 'trained pair (MAGRPO)');
    if (trained === undefined || others.length === 0) return `seed ${r.seed}: -`;
    const best = others.reduce((a, b) => (b.metrics.return > a.metrics.return ? b : a));
    const d = trained - best.metrics.return;
    return `seed ${r.seed} ${d >= 0 ? '+' : '−'}${fmt(Math.abs(d))} (over ${best.method}, ${fmt(best.metrics.return)})`;
  });
}

function meanOf(results: Result[], method: string, key: string): number | null {
  const v = results.flatMap((r) => {
    const x = r.rows.find((row) => row.method === method)?.metrics[key];
    return x === undefined ? [] : [x];
  });
  return v.length ? v.reduce((a, b) => a + b, 0) / v.length : null;
}

/** The README with every marked section regenerated. */
export function renderReadme(readme: string, root = '.'): string {
  return readme.replace(/(<!-- results:([\w-]+) -->)[\s\S]*?(<!-- \/results:\2 -->)/g, (_, open: string, name: string, close: string) => {
    if (!SECTIONS[name]) throw new Error(`README: unknown results section "${name}" (known: ${Object.keys(SECTIONS).join(', ')})`);
    return `${open}\n${renderSection(name, root)}\n${close}`;
  });
}

/** The files with generated sections. */
export const GENERATED_FILES = ['README.md', 'docs/reward-hacking.md'];

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const file of GENERATED_FILES.filter((f) => existsSync(f))) {
    const text = readFileSync(file, 'utf8');
    const next = renderReadme(text);
    if (!process.argv.includes('--check')) writeFileSync(file, next);
    else if (next !== text) {
      process.stderr.write(`${file}: result tables differ from results/: run npx tsx scripts/readme-results.ts\n`);
      process.exit(1);
    }
  }
}
