/**
 * The paper's coding environments (paper §5.2; docs/environments.md): agent 1 writes a helper
 * `aux(...)`, agent 2 the entry point that may call it; one joint reward (reward.ts, max 4.0) scores
 * the combined program in the Python sandbox. Multi-turn runs use one of the feedback transitions
 * (feedback.ts); `num_agents: 1` is the single-model variant (GRPO), scored with aux = "" (max 2.1).
 *
 *   humanevalEnvironment        HumanEval, paper-era splits (train test[33:133], eval test[:32])
 *   coopPythonEnvironment       generated helper + main problems (data/coding, see its README)
 *   codingEnvironmentFromJsonl  any HumanEval-format JSONL file
 *
 * Rewards are raw (0 to 4). The reference's later configs shift them by −4 with early termination
 * at −0.2; the paper-era ones keep them raw with the threshold at 4.0. Set `reward_processor` and
 * `early_termination_threshold` in the trainer config to match one or the other: with raw rewards
 * and the trainer's default threshold (−0.2) no branch would ever be expanded to a second turn.
 */
import { basename } from 'node:path';
import type { Formatter, Task } from '../../rl/task.js';
import { PythonSandbox } from '../../sandbox/index.js';
import { type Environment, episodeResults } from '../environment.js';
import { readOptions } from '../options.js';
import { codingBaselines } from './baselines.js';
import { type CodingItem, humanevalSplits, loadCodingJsonl, loadCoopPython } from './data.js';
import type { ExpertOptions } from './expert.js';
import { codingTransition, type FeedbackOptions } from './feedback.js';
import { codingMetrics } from './metrics.js';
import {
  type CodingJsonlOptions,
  CodingJsonlOptionsSchema,
  type CodingOptions,
  CodingOptionsSchema,
  type CoopPythonOptions,
  CoopPythonOptionsSchema,
  type ResolvedCodingOptions,
} from './options.js';
import { type CodingRole, type PromptStyle, promptStyle } from './prompt-style.js';
import { type CodeRewardOptions, codeReward } from './reward.js';

export type { CodingItem } from './data.js';
export { CodingDataError, humanevalSplits, loadCodingJsonl, loadCoopPython, loadHumanEval } from './data.js';
export { codingTransition, type FeedbackOptions } from './feedback.js';
export { codingMetrics } from './metrics.js';
export {
  type AuxPenaltyMode,
  type CodingJsonlOptions,
  type CodingOptions,
  type CoopPythonOptions,
  FEEDBACK_MODES,
  type FeedbackMode,
  type PromptStyleName,
} from './options.js';
export { CHAT, CODE, INSTRUCT, type PromptStyle, promptStyle } from './prompt-style.js';
export { COMPONENT_MAX, type CodeRewardOptions, type CodeRewardResult, codeReward } from './reward.js';

/** What a coding environment runs with besides its options (options.ts): objects a config file cannot hold. */
export interface CodingRuntime {
  /** Runs every reward, diagnostic and baseline program (default: a new sandbox with default limits). */
  sandbox?: PythonSandbox;
  /** The expert of feedback_mode expert_edits (default: the MAGRPO_EXPERT_* environment variables). */
  expert?: ExpertOptions;
}

/** Later turns receive complete prompts from the transition and use them as they are, wrapped as the style sends text. */
const firstTurn =
  (style: PromptStyle, format: (item: CodingItem) => string): Formatter<CodingItem> =>
  (item, external) =>
    style.wrap(external ?? format(item));

function codingEnvironment(
  spec: { name: string; description: string; splits: () => { train: CodingItem[]; eval: CodingItem[] } },
  o: ResolvedCodingOptions,
  runtime: CodingRuntime,
): Environment<CodingItem> {
  const sandbox = runtime.sandbox ?? new PythonSandbox();
  const numAgents = o.num_agents;
  const style = promptStyle(o.prompt_style);
  const roles: CodingRole[] = numAgents === 2 ? ['aux', 'main'] : ['single'];
  const reward: CodeRewardOptions = { auxPenalty: o.aux_penalty };
  const feedback: FeedbackOptions = {
    mode: o.feedback_mode,
    sandboxSlice: o.sandbox_slice,
    originalPrompt: o.original_prompt,
    previousResponse: o.previous_response,
    expert: runtime.expert,
  };
  let cached: { train: CodingItem[]; eval: CodingItem[] } | null = null;
  const splits = () => {
    cached ??= spec.splits();
    return { train: [...cached.train], eval: [...cached.eval] };
  };
  return {
    name: spec.name,
    description: spec.description,
    numAgents,
    defaultSplits: splits,
    task(split = {}): Task<CodingItem> {
      return {
        name: spec.name,
        outputKind: 'code',
        dataset: split.train ?? splits().train,
        evalDataset: split.eval ?? splits().eval,
        formatters: roles.map((role) => firstTurn(style, style[role])),
        reward: async ({ completions, item }) => {
          if (completions.length !== numAgents) throw new Error(`the ${spec.name} reward scores ${numAgents} agent(s), got ${completions.length}`);
          const codes = completions.map((c, i) => style.opening(item, roles[i]) + c);
          const [auxText, mainText] = numAgents === 2 ? codes : ['', codes[0]];
          const r = await codeReward({ auxText, mainText, test: item.test, entryPoint: item.entry_point, prompt: item.prompt }, sandbox, reward);
          return { reward: r.reward, components: { ...r.components } };
        },
        // The feedback prompts are instructions: code-style teams play one turn (the trainer says so).
        transition: style.name !== 'code' ? codingTransition(sandbox, numAgents, feedback) : undefined,
        // Trainer eval episodes carry no timing or token counts: only the reward table and pass@k.
        evalMetrics: (episodes) => {
          const table = codingMetrics(episodeResults(episodes));
          delete table.response_s;
          delete table.output_tokens;
          return table;
        },
      };
    },
    metrics: (episodes) => codingMetrics(episodes),
    baselines: codingBaselines(sandbox, reward, style),
  };
}

/** HumanEval (164 problems, MIT) with the paper-era splits; `humanevalSplits().final` is test[133:]. */
export function humanevalEnvironment(options: CodingOptions & CodingRuntime = {}): Environment<CodingItem> {
  const { sandbox, expert, ...rest } = options;
  return codingEnvironment(
    {
      name: 'humaneval',
      description: 'HumanEval: aux writes a helper, main the entry point (train test[33:133], eval test[:32])',
      splits: () => {
        const { train, eval: evalItems } = humanevalSplits();
        return { train, eval: evalItems };
      },
    },
    readOptions(CodingOptionsSchema, rest, 'humaneval'),
    { sandbox, expert },
  );
}

/** Generated problems that decompose into a helper and a main function (data/coding/coop-python.*). */
export function coopPythonEnvironment(options: CoopPythonOptions & CodingRuntime = {}): Environment<CodingItem> {
  const { sandbox, expert, ...rest } = options;
  const { data_dir, ...o } = readOptions(CoopPythonOptionsSchema, rest, 'coop-python');
  return codingEnvironment(
    {
      name: 'coop-python',
      description: 'generated helper + main Python problems in HumanEval format, small enough for tiny models',
      splits: () => loadCoopPython(data_dir),
    },
    o,
    { sandbox, expert },
  );
}

/** Any HumanEval-format JSONL file as training data, with an optional second file for evaluation. */
export function codingEnvironmentFromJsonl(
  file: string,
  options: Omit<CodingJsonlOptions, 'file'> & CodingRuntime & { name?: string } = {},
): Environment<CodingItem> {
  const { sandbox, expert, name, ...rest } = options;
  const { file: _, eval_file, ...o } = readOptions(CodingJsonlOptionsSchema, { ...rest, file }, 'coding-jsonl');
  return codingEnvironment(
    {
      name: name ?? basename(file).replace(/\.jsonl(\.gz)?$/, ''),
      description: `HumanEval-format problems from ${file}`,
      splits: () => ({ train: loadCodingJsonl(file), eval: eval_file ? loadCodingJsonl(eval_file) : [] }),
    },
    o,
    { sandbox, expert },
  );
}
