/** Run config files: errors by key path and file position, --set, JSON Schema, shipped examples. */
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { schemaText } from '../../src/cli/schema.js';
import { FEEDBACK_MODES } from '../../src/envs/coding/index.js';
import { ENVIRONMENTS } from '../../src/envs/registry.js';
import { ConfigError } from '../../src/rl/config.js';
import type { Task } from '../../src/rl/task.js';
import { ConfigFileError, loadRunConfig, parseSet } from '../../src/run/config-file.js';
import { prepareRun } from '../../src/run/prepare.js';
import { runConfigJsonSchema } from '../../src/run/run-config.js';
import { promptFits, taskEnvironment } from '../../src/run/user-env.js';
import { makeTinyModel } from '../helpers/tiny-model.js';

const dir = mkdtempSync(join(tmpdir(), 'magrpo-config-'));
let n = 0;
function file(text: string): string {
  const f = join(dir, `c${n++}.yaml`);
  writeFileSync(f, text);
  return f;
}
/** The error's lines without the temp-file prefix. */
function problems(f: string, sets: string[] = []): string[] {
  try {
    loadRunConfig(f, sets);
  } catch (e) {
    assert.ok(e instanceof ConfigFileError, String(e));
    assert.equal(e.code, 'INVALID_CONFIG');
    assert.equal(e.file, f);
    return e.message
      .split('\n')
      .slice(1)
      .map((l) => l.trim().replace(`${f}:`, ''));
  }
  assert.fail('expected a ConfigFileError');
}

const OK = 'env:\n  name: tldr\nmodel: m\n';

describe('config errors name the key path, the location and the allowed values', () => {
  it('a misspelled key: unknown, with a did-you-mean suggestion and its line:col', () => {
    assert.deepEqual(problems(file(`${OK}trainer:\n  num_generatons: 8\n`)), ['5:3  trainer.num_generatons: unknown key — did you mean "num_generations"?']);
    assert.deepEqual(problems(file(`${OK}runname: x\n`)), ['4:1  runname: unknown key — did you mean "run_name"?']);
  });

  it('a removed reference key says why it is gone; at its unset value (a resolved run config) it is dropped', () => {
    assert.deepEqual(problems(file(`${OK}trainer:\n  eval_batch_size: 8\n`)), [
      '5:3  trainer.eval_batch_size: eval_batch_size was never used: evaluation samples every eval episode of a turn in one batch per agent; remove it',
    ]);
    assert.doesNotThrow(() => loadRunConfig(file(`${OK}trainer:\n  eval_batch_size: 1\n  agent_devices: null\n  reference_devices: null\n`)));
  });

  it('a bad enum lists the allowed values; a bad environment name gets a suggestion', () => {
    assert.deepEqual(problems(file(`${OK}trainer:\n  joint_mode: crossed-out\n`)), [
      '5:3  trainer.joint_mode: got "crossed-out", expected one of "aligned", "align", "cross", "crossed"',
    ]);
    assert.deepEqual(problems(file('env:\n  name: tdlr\nmodel: m\n')), [
      '2:3  env.name: got "tdlr", expected one of tldr, arxiv, humaneval, coop-python, coding-jsonl — did you mean "tldr"?',
    ]);
  });

  it('invalid values show what was given and what is expected', () => {
    assert.deepEqual(problems(file(`${OK}trainer:\n  temperature: -1\n  num_generations: 1.5\n`)), [
      '5:3  trainer.temperature: got -1, too small: expected number to be >=0',
      '6:3  trainer.num_generations: got 1.5, expected int, received number',
    ]);
    assert.deepEqual(problems(file(`${OK}eval:\n  baselines: some\n`)), [
      `5:3  eval.baselines: got "some", expected the environment's inference baselines to compare with: all, none, or a list of names`,
    ]);
  });

  it('every problem in one pass, in file order', () => {
    const lines = problems(file('env:\n  name: arxiv\n  options: {version: newest, colour: red}\nmodel: m\ntrainer:\n  seed: -1\n  top_pp: 0.5\n'));
    assert.equal(lines.length, 4, lines.join('\n'));
    assert.match(lines[0], /^3:\d+ {2}env\.options\.version: got "newest", expected one of "paper", "latest"$/);
    assert.match(lines[1], /env\.options: unknown key|env\.options\.colour: unknown key/);
    assert.match(lines[2], /^6:3 {2}trainer\.seed: got -1/);
    assert.match(lines[3], /^7:3 {2}trainer\.top_pp: unknown key — did you mean "top_p"\?$/);
  });

  it('cross-field rules: exactly one of model/models and env.name/env.module; trainer.output_dir is the run dir', () => {
    assert.deepEqual(problems(file('env:\n  name: tldr\n  module: ./x.ts\nmodel: a\nmodels: [a, b]\ntrainer:\n  output_dir: out\n')), [
      '1:1  env: give exactly one of env.name (a ready-made environment) or env.module (your own file)',
      '4:1  model: give exactly one of model (one folder for all agents) or models (one per agent)',
      '7:3  trainer.output_dir: set by magrpo to the run directory: use the top-level output_dir and run_name',
    ]);
  });

  it('YAML syntax errors give file:line:col', () => {
    const f = file('env:\n  name: tldr\nmodel: [a, b\ntrainer:\n  seed: 1\n');
    const lines = problems(f);
    assert.ok(lines.length >= 1);
    assert.match(lines[0], /^\d+:\d+ {2}\(yaml\): /);
    assert.ok(
      lines.some((l) => /^(3|4|6):\d+/.test(l)),
      lines.join('\n'),
    );
    assert.deepEqual(problems(file('env:\n  name: tldr\nmodel: a\nmodel: b\n')), ['4:1  (yaml): Map keys must be unique']);
  });
});

describe('--set overrides', () => {
  it('parses values as YAML scalars and key paths with list indices', () => {
    assert.deepEqual(parseSet('trainer.num_generations=8'), { path: ['trainer', 'num_generations'], value: 8 });
    assert.deepEqual(parseSet('trainer.top_k=null'), { path: ['trainer', 'top_k'], value: null });
    assert.deepEqual(parseSet('eval.at_end=false'), { path: ['eval', 'at_end'], value: false });
    assert.deepEqual(parseSet('models.1=other/dir'), { path: ['models', 1], value: 'other/dir' });
    assert.deepEqual(parseSet('eval.baselines=[a, b]'), { path: ['eval', 'baselines'], value: ['a', 'b'] });
    assert.deepEqual(parseSet('trainer.agent_learning_rate=1e-5'), { path: ['trainer', 'agent_learning_rate'], value: 1e-5 });
  });

  it('applies over the file, and a bad override is reported as the flag', () => {
    const f = file(`${OK}trainer:\n  num_generations: 4\n`);
    assert.equal(loadRunConfig(f, ['trainer.num_generations=8']).config.trainer.num_generations, 8);
    assert.equal(loadRunConfig(f, ['run_name=exp-1']).config.run_name, 'exp-1');
    assert.deepEqual(problems(f, ['trainer.num_generations=one']), [
      '--set trainer.num_generations=one  trainer.num_generations: got "one", expected number, received string',
    ]);
    assert.throws(() => parseSet('no-equals-sign'), /expected key\.path=value/);
  });
});

describe('JSON Schema and shipped configs', () => {
  it('configs/schema.json is up to date (regenerate: magrpo schema > configs/schema.json)', () => {
    assert.equal(readFileSync('configs/schema.json', 'utf8'), schemaText());
  });

  it('every key of the schema has a description', () => {
    const missing: string[] = [];
    const walk = (s: Record<string, unknown>, path: string) => {
      for (const [k, v] of Object.entries((s.properties ?? {}) as Record<string, Record<string, unknown>>)) {
        if (typeof v.description !== 'string') missing.push(`${path}${k}`);
        const inner = (v.anyOf as Record<string, unknown>[] | undefined)?.find((x) => x.type === 'object') ?? v;
        walk(inner, `${path}${k}.`);
      }
    };
    walk(runConfigJsonSchema(), '');
    for (const e of ENVIRONMENTS) walk({ properties: e.options.shape }, `env(${e.name}).options.`);
    assert.deepEqual(
      missing.filter((m) => !m.startsWith('env(')),
      [],
    );
    for (const e of ENVIRONMENTS)
      for (const [k, v] of Object.entries(e.options.shape)) assert.ok((v as { description?: string }).description, `${e.name}.${k}`);
  });

  it('the JSON Schema carries each environment’s options', () => {
    const s = runConfigJsonSchema() as { properties: { env: { allOf: { if: { properties: { name: { const: string } } } }[] } } };
    assert.deepEqual(
      s.properties.env.allOf.map((x) => x.if.properties.name.const),
      ENVIRONMENTS.map((e) => e.name),
    );
  });

  it('the registry’s coding feedback modes are the coding environment’s', () => {
    const entry = ENVIRONMENTS.find((e) => e.name === 'humaneval');
    assert.ok(entry);
    const modes = (entry.options.shape.feedback_mode as unknown as { _zod: { def: { innerType: { options: string[] } } } })._zod.def.innerType.options;
    assert.deepEqual(modes, [...FEEDBACK_MODES]);
  });

  it('every example config in configs/ validates', () => {
    const files = [...readdirSync('configs').filter((f) => f.endsWith('.yaml')), 'custom/config.yaml'].map((f) => join('configs', f));
    assert.ok(files.length >= 5, files.join(', '));
    const names = new Set<string>();
    for (const f of files) {
      const { config } = loadRunConfig(f);
      names.add(config.env.name ?? 'module');
    }
    assert.deepEqual([...names].sort(), ['arxiv', 'coop-python', 'humaneval', 'module', 'tldr']);
  });
});

describe('env.options.prompt_style chat', () => {
  it('a model without a chat template is a config error naming the option and the model; one with a template prepares', async () => {
    const [chat, plain] = [makeTinyModel({ chat: true }), makeTinyModel()];
    try {
      const config = (models: string[]) => file(`env:\n  name: tldr\n  options:\n    prompt_style: chat\nmodels: [${models.join(', ')}]\n`);
      await assert.rejects(prepareRun(config([chat, plain])), (e: unknown) => {
        assert.ok(e instanceof ConfigError);
        assert.deepEqual(e.message.split('\n').slice(1), [
          `  env.options.prompt_style: got "chat", but the model ${plain} has no chat template (chat_template in tokenizer_config.json, chat_template.jinja, or a GGUF file's tokenizer.chat_template) — use an instruction-tuned model that has one, or prompt_style instruct`,
        ]);
        return true;
      });
      assert.deepEqual((await prepareRun(config([chat, chat]))).models, [chat, chat]);
    } finally {
      for (const d of [chat, plain]) rmSync(d, { recursive: true, force: true });
    }
  });

  it('max_prompt_tokens counts the rendered template', () => {
    const chat = makeTinyModel({ chat: true });
    try {
      const task: Task<unknown> = { dataset: [], formatters: (item) => [{ role: 'user', content: (item as { prompt: string }).prompt }], reward: () => 0 };
      const env = taskEnvironment(task, 'test');
      // <|im_start|> user go a <|im_end|> <|im_start|> assistant
      assert.deepEqual(
        [6, 7].map((max) => promptFits(env, [chat, chat], max)({ prompt: 'go a' })),
        [false, true],
      );
    } finally {
      rmSync(chat, { recursive: true, force: true });
    }
  });
});
