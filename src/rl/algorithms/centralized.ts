/**
 * Centralized MAGRPO (CoMLRL comlrl/trainers/reinforce/centralized_magrpo.py and
 * preference/collaboration.py): ONE joint policy plays all R roles of a task. Single turn.
 *
 *   prompt   p = adapter.buildPrompt(x, [formatter_1(x), …, formatter_R(x)])
 *   sample   G joint completions y^1..y^G of p
 *   reward   r^g = reward(adapter.parseCompletion(y^g) → one output per role)   (no sections: all "")
 *   update   MAGRPO with one agent (GRPO) on the joint completions:
 *            L = −(1/G') Σ_g A_g · Σ_t log π(y^g_t | p, y^g_<t)
 *
 * The roles exist only at the environment's boundary: rewards, eval metrics and eval tables see
 * the parsed outputs, learning sees the joint text (`centralTask`).
 */
import { z } from 'zod';
import { type CentralAdapter, type Prompt, promptText, type RewardComponent, type RewardInput, type Task, TaskError } from '../task.js';
import type { Algorithm, TeamTask } from './algorithm.js';
import { MAGRPO_OPTIONS, policyGradientLoss, policyGradientSample } from './magrpo.js';

/** Centralized MAGRPO's own key (the family's keys are its too). */
export const CENTRALIZED_OPTIONS = {
  num_roles: z
    .number()
    .int()
    .min(1)
    .max(64)
    .nullable()
    .default(null)
    .describe("centralized_magrpo: roles the one joint policy plays (CoMLRL's num_agents of a centralized run); null = one per formatter of the task"),
};

/** CoMLRL's TaggedCentralizedComparatorAdapter: each role's output between <agent_i> and </agent_i>. */
export const TAGGED_ADAPTER: CentralAdapter<unknown> = {
  buildPrompt(_item, rolePrompts) {
    const sections = rolePrompts.map((p, i) => `Agent ${i} original prompt:\n${p}`).join('\n\n');
    const outputs = rolePrompts.map((_, i) => `<agent_${i}>\n...\n</agent_${i}>`).join('\n');
    return `You are a centralized coordinator producing the separate outputs of ${rolePrompts.length} agents.

Each output must satisfy its corresponding original prompt. Keep the outputs separate;
do not merge them or add commentary outside the required tags.

${sections}

Return exactly one section for each agent in this format:
${outputs}
`;
  },
  parseCompletion(completion, _item, roles) {
    const found = Array.from({ length: roles }, (_, i) => new RegExp(`<\\s*agent_${i}\\s*>([\\s\\S]*?)<\\s*/\\s*agent_${i}\\s*>`, 'i').exec(completion));
    return found.some((m) => m !== null) ? found.map((m) => (m ? m[1].trim() : '')) : null;
  },
};

/** The roles' outputs of a joint completion: the adapter's, checked, or "" for every role when it found no section. */
export function splitRoles<Item>(adapter: CentralAdapter<Item>, completion: string, item: Item, roles: number): string[] {
  const out = adapter.parseCompletion(completion, item, roles);
  if (out === null) return new Array<string>(roles).fill('');
  if (!Array.isArray(out) || out.length !== roles || out.some((o) => typeof o !== 'string'))
    throw new TaskError('centralAdapter', `parseCompletion must return ${roles} strings (one per role) or null`);
  return [...out];
}

/**
 * The one-agent task a joint policy trains on: one formatter (the adapter's joint prompt over
 * the roles' prompts), the task's reward and eval metrics on the roles' parsed outputs.
 */
export function centralTask<Item>(task: Task<Item>, roles: number, adapter: CentralAdapter<Item> = task.centralAdapter ?? TAGGED_ADAPTER): TeamTask<Item> {
  const formatters = rolesFormatters(task, roles);
  const rolePrompts = (item: Item) => formatters.map((f) => promptText(f(item)));
  const asRoles = (input: RewardInput<Item>): RewardInput<Item> => ({
    ...input,
    completions: splitRoles(adapter, input.completions[0], input.item, roles),
    prompts: rolePrompts(input.item),
  });
  const reward = task.reward;
  const evalMetrics = task.evalMetrics;
  const joint: Task<Item> = {
    ...task,
    // Roles prompted with chat messages: the joint prompt is the user turn of the policy's template.
    formatters: [
      (item: Item): Prompt => {
        const text = adapter.buildPrompt(item, rolePrompts(item));
        return typeof formatters[0](item) === 'string' ? text : [{ role: 'user', content: text }];
      },
    ],
    reward:
      typeof reward === 'function'
        ? (input) => reward(asRoles(input))
        : reward.map((c): RewardComponent<Item> => ({ ...c, fn: (input) => c.fn(asRoles(input)) })),
    transition: undefined,
    evalMetrics:
      evalMetrics &&
      ((episodes) =>
        evalMetrics(
          episodes.map((ep) => ({
            ...ep,
            turns: ep.turns.map((t) => ({ ...t, prompts: rolePrompts(ep.item), completions: splitRoles(adapter, t.completions[0], ep.item, roles) })),
          })),
        )),
  };
  return { task: joint, roleOutputs: (completions, item) => splitRoles(adapter, completions[0], item, roles) };
}

/** The task's formatters as one per role (a single one, or none: the same for every role). */
function rolesFormatters<Item>(task: Task<Item>, roles: number) {
  const f = task.formatters;
  const fallback = (item: Item) => {
    const p = (item as { prompt?: unknown } | null)?.prompt;
    return typeof p === 'string' ? p : '';
  };
  if (f === undefined || typeof f === 'function') return Array.from({ length: roles }, () => f ?? fallback);
  if (f.length !== roles) throw new TaskError('formatters', `got ${f.length} formatters for num_roles ${roles}; give one, or exactly num_roles`);
  return [...f];
}

type CentralizedOptions = z.output<z.ZodObject<typeof MAGRPO_OPTIONS & typeof CENTRALIZED_OPTIONS>>;

export const CENTRALIZED_MAGRPO: Algorithm<CentralizedOptions> = {
  name: 'centralized_magrpo',
  options: { ...MAGRPO_OPTIONS, ...CENTRALIZED_OPTIONS },
  schedule: 'online',
  check(c) {
    const out = [];
    if (c.num_turns !== 1) out.push({ path: ['num_turns'], message: `centralized_magrpo is single-turn (num_turns 1), got ${c.num_turns}` });
    if (c.num_agents !== 1)
      out.push({
        path: ['num_agents'],
        message: `centralized_magrpo trains one joint policy: set num_agents 1 (one model; num_roles sets the roles), got ${c.num_agents}`,
      });
    return out;
  },
  team(task, c) {
    const roles = c.num_roles ?? (Array.isArray(task.formatters) ? task.formatters.length : null);
    if (roles === null) throw new TaskError('formatters', 'centralized_magrpo needs the role count: set num_roles, or give one formatter per role');
    return centralTask(task, roles);
  },
  samples: (node, c) => node.groups.map((_, i) => [policyGradientSample(node, i, c)]),
  loss: policyGradientLoss,
};
