/**
 * `magrpo init <name>`: a working custom environment to start from: env.ts (a Task with a small
 * dataset, per-agent prompts and a joint reward made of named components), config.yaml pointing
 * at it, and a README. `magrpo train <name>/config.yaml` runs it as is.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { checkModelFolder } from './model-folder.js';
import { CLI } from './options.js';

/** The magrpo package folder (from src/ under tsx, or dist/src/ when compiled). */
function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json')) && dirname(dir) !== dir) dir = dirname(dir);
  return dir;
}

/** The model a scaffold trains by default: the shipped micro model, when present. */
function shippedModel(): string | null {
  const micro = join(packageRoot(), 'models', 'micro');
  return existsSync(micro) ? micro : null;
}

/** The example task, kept once in configs/custom/env.ts (which the repo also trains as an example). */
function envTemplate(): string {
  return readFileSync(join(packageRoot(), 'configs', 'custom', 'env.ts'), 'utf8');
}

function configYaml(model: string): string {
  return `# Train with:  ${CLI} train config.yaml      (paths below are relative to this file)
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
${CLI} train ${name}/config.yaml                 # progress bar, runs/<timestamp>/
${CLI} train ${name}/config.yaml --set trainer.num_generations=8
${CLI} dashboard runs/<run>                    # charts and rollout trees
${CLI} eval runs/<run>                         # the trained team on the eval items
\`\`\`

Ideas: make the reward depend on both completions (e.g. agent 1 must continue agent 0's last
word), add \`num_turns: 2\` with a \`transition\` that shows each agent the other's text.
`;
}

/** Writes the scaffold; returns the folder. Refuses a non-empty folder. */
export function scaffold(target: string, model?: string): string {
  const dir = resolve(target);
  if (existsSync(dir) && readdirSync(dir).length > 0) throw new Error(`${dir}: exists and is not empty`);
  if (model !== undefined) checkModelFolder(model, '--model');
  mkdirSync(dir, { recursive: true });
  const m = model ?? shippedModel();
  const modelLine = m ? JSON.stringify(relative(dir, resolve(m)) || '.') : './path/to/model   # a Hugging Face-format model folder';
  writeFileSync(join(dir, 'env.ts'), envTemplate());
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
  ${CLI} init my-task && ${CLI} train my-task/config.yaml
  ${CLI} init other-task --model models/small`,
    )
    .action((name: string, flags: { model?: string }) => {
      const dir = scaffold(name, flags.model);
      const hasModel = flags.model !== undefined || shippedModel() !== null;
      process.stdout.write(`created ${dir}/{env.ts,config.yaml,README.md}\nnext: ${CLI} train ${join(name, 'config.yaml')}\n`);
      if (!hasModel) process.stderr.write(`set "model:" in ${join(name, 'config.yaml')} to a model folder first (or pass --model)\n`);
    });
}
