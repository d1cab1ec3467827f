/**
 * `magrpo init <name>`: a working custom environment to start from: env.ts (a Task with a small
 * dataset, per-agent prompts and a joint reward made of named components), config.yaml pointing
 * at it, and a README. `magrpo train <name>/config.yaml` runs it as is.
 */
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';

/** The model a scaffold trains by default: the shipped micro model, when present. */
function shippedModel(): string | null {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json')) && dirname(dir) !== dir) dir = dirname(dir);
  const micro = join(dir, 'models', 'micro');
  return existsSync(micro) ? micro : null;
}

const ENV_TS = `/**
 * A cooperative two-agent task: agent 0 starts a sentence about a topic, agent 1 finishes it.
 * Neither sees the other's text; one joint reward scores the pair (MAGRPO trains both on it).
 * Edit the data, the prompts and the reward; \`magrpo train config.yaml\` picks the changes up.
 */
import type { RewardInput, Task } from 'magrpo';

interface Item {
  topic: string;
}

const TOPICS = ['the sea', 'a whale', 'the ship', 'the storm', 'the harbour', 'the captain', 'a rope', 'the moon', 'the island', 'a lantern'];

const words = (s: string) => s.toLowerCase().match(/[a-z']+/g) ?? [];

/** Named reward parts, each in [0, 1]; the dashboard charts them separately. */
const bothWrote = ({ completions }: RewardInput<Item>) => (completions.every((c) => words(c).length > 0) ? 1 : 0);
const balanced = ({ completions }: RewardInput<Item>) => {
  const [a, b] = completions.map((c) => words(c).length);
  return Math.max(a, b) === 0 ? 0 : Math.min(a, b) / Math.max(a, b);
};
const onTopic = ({ completions, item }: RewardInput<Item>) => {
  const key = words(item.topic).pop() ?? '';
  return completions.filter((c) => words(c).includes(key)).length / completions.length;
};

export const task: Task<Item> = {
  name: 'two-halves',
  dataset: TOPICS.slice(0, 8).map((topic) => ({ topic })),
  evalDataset: TOPICS.slice(8).map((topic) => ({ topic })),
  // One prompt per agent, in agent order.
  formatters: [
    (item) => \`Write the first half of a sentence about \${item.topic}:\`,
    (item) => \`Write the second half of a sentence about \${item.topic}:\`,
  ],
  // total = Σ weight · component; components are logged as turn_1/reward/<name>.
  reward: [
    { name: 'both_wrote', weight: 0.4, fn: bothWrote },
    { name: 'balanced', weight: 0.3, fn: balanced },
    { name: 'on_topic', weight: 0.3, fn: onTopic },
  ],
};

export default task;
`;

function configYaml(model: string): string {
  return `# Train with:  magrpo train config.yaml      (paths below are relative to this file)
env:
  module: ./env.ts
model: ${model}
run_name: null          # null: a timestamp under output_dir
output_dir: runs
trainer:
  num_agents: 2
  num_generations: 4
  num_train_epochs: 2
  max_new_tokens: 24
  temperature: 0.9
  top_p: 1.0
  agent_learning_rate: 1.0e-4
  rollout_buffer_size: 2
  eval_interval: 4
  eval_num_samples: 2
  logging_steps: 1
  save_steps: 4
eval:
  baselines: none       # a bare Task has no baselines; ready-made environments do
samples:
  every: 1
`;
}

function readme(name: string): string {
  return `# ${name}: a custom magrpo environment

- \`env.ts\`: the task. It exports a \`Task\`: training and eval items, one prompt formatter per
  agent, and a joint reward (here three named components). Any export that is a Task, an
  Environment, or a function of \`env.options\` returning one works.
- \`config.yaml\`: the run config. \`magrpo schema\` prints its JSON Schema (every key, with its
  description): save it as schema.json and add \`# yaml-language-server: $schema=./schema.json\`
  on top of config.yaml for completion in your editor.

\`\`\`sh
magrpo train ${name}/config.yaml                     # progress bar, runs/<timestamp>/
magrpo train ${name}/config.yaml --set trainer.num_generations=8
magrpo dashboard runs/<run>                        # charts and rollout trees
magrpo eval runs/<run>                             # the trained team on the eval items
\`\`\`

Ideas: make the reward depend on both completions (e.g. agent 1 must continue agent 0's last
word), add \`num_turns: 2\` with a \`transition\` that shows each agent the other's text.
`;
}

/** Writes the scaffold; returns the folder. Refuses a non-empty folder. */
export function scaffold(target: string, model?: string): string {
  const dir = resolve(target);
  if (existsSync(dir) && readdirSync(dir).length > 0) throw new Error(`${dir}: exists and is not empty`);
  mkdirSync(dir, { recursive: true });
  const m = model ?? shippedModel();
  const modelLine = m ? JSON.stringify(relative(dir, resolve(m)) || '.') : './path/to/model   # a Hugging Face-format model folder';
  writeFileSync(join(dir, 'env.ts'), ENV_TS);
  writeFileSync(join(dir, 'config.yaml'), configYaml(modelLine));
  writeFileSync(join(dir, 'README.md'), readme(basename(dir)));
  return dir;
}

export function registerInit(program: Command): void {
  program
    .command('init')
    .description('Scaffold a custom environment (env.ts, config.yaml, README.md) that trains as is')
    .argument('<name>', 'folder to create')
    .option('-m, --model <dir>', 'model folder the config trains (default: the shipped models/micro)')
    .addHelpText(
      'after',
      `
Examples:
  magrpo init my-task && magrpo train my-task/config.yaml
  magrpo init my-task --model ~/models/Qwen2.5-0.5B`,
    )
    .action((name: string, flags: { model?: string }) => {
      const dir = scaffold(name, flags.model);
      const hasModel = flags.model !== undefined || shippedModel() !== null;
      process.stdout.write(`created ${dir}/{env.ts,config.yaml,README.md}\nnext: magrpo train ${join(name, 'config.yaml')}\n`);
      if (!hasModel) process.stderr.write(`set "model:" in ${join(name, 'config.yaml')} to a model folder first (or pass --model)\n`);
    });
}
