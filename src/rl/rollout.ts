/**
 * The rollout tree of one item (CoMLRL `_train_step_returns`, comlrl/trainers/reinforce/magrpo.py; docs/algorithms.md). Every node: each agent samples G completions of
 * its prompt; joint actions (aligned: G, cross: G^N) are scored by the joint reward; unless the
 * node terminates early, each joint action's transition spawns a child node at the next turn.
 *
 * All nodes of one turn are sampled together (one batch per agent; buildTrees: of several items),
 * which is much faster on CPU than the reference's depth-first recursion; env steps are then
 * numbered in depth-first pre-order, exactly as the reference numbers them.
 */

import { jointIndices, jointReturns, mean } from './advantage.js';
import type { SampledGroup, SamplingParams } from './agent.js';
import { type AgentHandle, sampleEach } from './agent-pool.js';
import type { MagrpoConfig } from './config.js';
import { type Formatter, isPrompt, type Prompt, promptText, type RewardInput, type Task, TaskError } from './task.js';
import { watched } from './watchdog.js';

export interface TreeNode {
  turn: number;
  /** Raw prompt per agent (the transition's output at turns > 0): what histories record. */
  rawPrompts: string[];
  /** Per agent: the formatted prompt and its G completions. */
  groups: SampledGroup[];
  /** Joint actions as per-agent completion indices. */
  joint: number[][];
  /** Processed joint reward per joint action. */
  rewards: number[];
  components: Record<string, number>[];
  /** Child node per joint action (null: leaf or early termination). */
  children: (TreeNode | null)[];
  /** Cumulative env steps once this node is scored (depth-first pre-order). */
  envStep: number;
  /** R^k, filled by computeReturns. */
  returns: number[];
  promptHistory: string[][];
  responseHistory: string[][];
}

/**
 * What prompts, rewards and transitions read (formatPrompt, computeReward, callTransition): the
 * task, one formatter per agent, and the two trainer keys that change them.
 */
export interface TaskContext<Item> {
  task: Task<Item>;
  /** One per agent: their number is the number of agents. */
  formatters: Formatter<Item>[];
  config: Pick<MagrpoConfig, 'external_prompt_passthrough' | 'reward_processor'>;
  /** Item index within the dataset (for error messages). */
  itemIndex: number;
}

export interface RolloutContext<Item> extends TaskContext<Item> {
  config: MagrpoConfig;
  agents: AgentHandle[];
}

export interface RolloutTimings {
  sampling: number;
  reward: number;
}

export function samplingParams(c: MagrpoConfig, greedy = false): SamplingParams {
  return { maxNewTokens: c.max_new_tokens, stopStrings: c.stop_strings, temperature: greedy ? 0 : c.temperature, topK: c.top_k, topP: c.top_p };
}

/**
 * The prompt agent i sees: formatter(item) at turn 0; later the transition's prompt, re-formatted.
 * A formatter that throws or returns anything but a string or a list of {role, content} messages
 * is a TaskError naming it and the item.
 */
export function formatPrompt<Item>(ctx: TaskContext<Item>, agent: number, item: Item, external: string | null): Prompt {
  if (external !== null && ctx.config.external_prompt_passthrough) return external;
  // As the reference: later turns' formatters see a copy of the item whose `prompt` is the external prompt.
  const arg =
    external !== null && typeof item === 'object' && item !== null
      ? ({ ...item, prompt: external, _original_prompt: (item as { prompt?: unknown }).prompt } as Item)
      : item;
  const where = `agent ${agent}, item ${ctx.itemIndex}`;
  let prompt: unknown;
  try {
    const seconds = ctx.task.callbackTimeoutSeconds ?? DEFAULT_CALLBACK_TIMEOUT_S;
    prompt = watched('formatters', where, seconds, () => (external === null ? ctx.formatters[agent](arg) : ctx.formatters[agent](arg, external)));
  } catch (e) {
    throw new TaskError('formatters', `threw on ${where}: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (!isPrompt(prompt)) {
    const got = prompt instanceof Promise ? 'a Promise (formatters must be synchronous)' : `${describe(prompt)}`;
    throw new TaskError('formatters', `returned ${got} on ${where}; a formatter returns the prompt string or a non-empty list of {role, content} messages`);
  }
  return prompt;
}

/** A short, safe description of a value a callback returned (never its full contents). */
function describe(v: unknown): string {
  if (v === null || v === undefined || typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (typeof v === 'string') return `the string ${JSON.stringify(v.slice(0, 40))}${v.length > 40 ? '…' : ''}`;
  if (Array.isArray(v)) return `an array of ${v.length}`;
  return `a ${typeof v === 'object' ? (v.constructor?.name ?? 'object') : typeof v}`;
}

/** Default seconds an async callback may take: a reward that never settles must not stall training silently. */
export const DEFAULT_CALLBACK_TIMEOUT_S = 600;

/** Awaits a callback's result, turning a throw, or no answer within the task's timeout, into a TaskError. */
async function settle<T>(task: Pick<Task<unknown>, 'callbackTimeoutSeconds'>, name: string, where: string, f: () => T | Promise<T>): Promise<T> {
  const seconds = task.callbackTimeoutSeconds ?? DEFAULT_CALLBACK_TIMEOUT_S;
  let timer: NodeJS.Timeout | undefined;
  try {
    // A synchronous loop never reaches the timer below: the watchdog stops the process instead.
    const value = watched(name, where, seconds, f);
    if (!(value instanceof Promise)) return value;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new TaskError(name, `did not settle within ${seconds} s on ${where} (Task.callbackTimeoutSeconds)`)), seconds * 1000);
    });
    return await Promise.race([value, timeout]);
  } catch (e) {
    if (e instanceof TaskError && e.field === name) throw e;
    throw new TaskError(name, `threw on ${where}: ${e instanceof Error ? e.message : String(e)}`);
  } finally {
    clearTimeout(timer);
  }
}

/** Builds and scores the whole tree of one item; returns the root. */
export async function buildTree<Item>(ctx: RolloutContext<Item>, item: Item, envStepBefore: number, timings: RolloutTimings): Promise<TreeNode> {
  const [root] = await buildTrees(ctx, [{ item, itemIndex: ctx.itemIndex }], envStepBefore, timings);
  return root;
}

/**
 * The trees of several items built together: each turn's nodes of every item are sampled in one
 * batch per agent (so a decode step reads the weights once for all of them), then scored and
 * expanded item by item. The caller guarantees that no weight changes between the items (the
 * trainer's sampling window). Env steps are numbered item after item, as if each tree had been
 * built alone after the one before it. Returns the roots in `items` order.
 */
export async function buildTrees<Item>(
  ctx: RolloutContext<Item>,
  items: readonly { item: Item; itemIndex: number }[],
  envStepBefore: number,
  timings: RolloutTimings,
): Promise<TreeNode[]> {
  const { config } = ctx;
  const N = ctx.agents.length;
  const G = config.num_generations;
  const joint = jointIndices(config.joint_mode, N, G);
  const empty = () => Array.from({ length: N }, () => [] as string[]);
  const ctxs = items.map((it) => ({ ...ctx, itemIndex: it.itemIndex }));
  // Each level: the nodes of item k at this turn.
  let level: TreeNode[][] = items.map((_, k) => [newNode(k, 0, new Array<string | null>(N).fill(null), empty(), empty())]);
  const roots = level.map((nodes) => nodes[0]);

  for (let turn = 0; level.some((nodes) => nodes.length > 0); turn++) {
    let t0 = performance.now();
    await sampleLevel(ctx, level.flat());
    timings.sampling += performance.now() - t0;
    t0 = performance.now();
    await Promise.all(level.flatMap((nodes, k) => nodes.map((node) => scoreNode(ctxs[k], items[k].item, node, joint))));
    timings.reward += performance.now() - t0;
    if (turn === config.num_turns - 1) break;
    const next: TreeNode[][] = [];
    for (const [k, nodes] of level.entries()) next.push(await expandLevel(k, nodes));
    level = next;
  }
  let step = envStepBefore;
  for (const root of roots) step = numberEnvSteps(root, step);
  return roots;

  function newNode(k: number, t: number, raw: (string | null)[], ph: string[][], rh: string[][]): TreeNode {
    const groups = raw.map((r, i) => ({ prompt: formatPrompt(ctxs[k], i, items[k].item, r), promptIds: [], completions: [] }) as SampledGroup);
    return {
      turn: t,
      rawPrompts: groups.map((g, i) => raw[i] ?? promptText(g.prompt)),
      groups,
      joint,
      rewards: [],
      components: [],
      children: [],
      envStep: 0,
      returns: [],
      promptHistory: ph,
      responseHistory: rh,
    };
  }

  async function expandLevel(k: number, nodes: TreeNode[]): Promise<TreeNode[]> {
    const next: TreeNode[] = [];
    for (const node of nodes) {
      const threshold = config.early_termination_threshold;
      if (threshold !== null && mean(node.rewards) > threshold) {
        node.children = node.joint.map(() => null);
        continue;
      }
      node.children = await Promise.all(
        node.joint.map(async (idx) => {
          const completions = idx.map((g, i) => node.groups[i].completions[g].text);
          const ph = node.promptHistory.map((h, i) => [...h, node.rawPrompts[i]]);
          const rh = node.responseHistory.map((h, i) => [...h, completions[i]]);
          const prompts = await callTransition(ctxs[k], items[k].item, node.turn, completions, ph, rh);
          return newNode(k, node.turn + 1, prompts, ph, rh);
        }),
      );
      next.push(...(node.children as TreeNode[]));
    }
    return next;
  }
}

/** One batched sampling call per agent for all nodes of a level (agents run concurrently). */
async function sampleLevel<Item>(ctx: RolloutContext<Item>, nodes: TreeNode[]): Promise<void> {
  const G = ctx.config.num_generations;
  const params = samplingParams(ctx.config);
  const results = await sampleEach(ctx.agents, (a) => nodes.map((n) => ({ prompt: n.groups[a.index].prompt, n: G })), params);
  for (const [i, groups] of results.entries()) for (const [k, node] of nodes.entries()) node.groups[i] = groups[k];
}

/** Scores every joint action of a node concurrently. */
async function scoreNode<Item>(ctx: RolloutContext<Item>, item: Item, node: TreeNode, joint: number[][]): Promise<void> {
  const scored = await Promise.all(
    joint.map((idx) =>
      computeReward(ctx, {
        completions: idx.map((g, i) => node.groups[i].completions[g].text),
        prompts: node.groups.map((g) => promptText(g.prompt)),
        item,
        turn: node.turn,
      }),
    ),
  );
  node.rewards = scored.map((s) => s.reward);
  node.components = scored.map((s) => s.components);
}

/**
 * The joint reward of one joint action: the task's function (or weighted components), then the
 * config's reward_processor, then the task's processor. A throw or a non-finite value is an
 * error naming the callback, the item and the turn.
 */
export async function computeReward<Item>(ctx: TaskContext<Item>, input: RewardInput<Item>): Promise<{ reward: number; components: Record<string, number> }> {
  const where = `item ${ctx.itemIndex}, turn ${input.turn}`;
  const call = <T>(name: string, f: () => T | Promise<T>): Promise<T> => settle(ctx.task, name, where, f);
  let reward: number;
  let components: Record<string, number> = {};
  const r = ctx.task.reward;
  if (typeof r === 'function') {
    const v = await call('reward', () => r(input));
    reward = typeof v === 'number' ? v : ((v as { reward?: number } | null)?.reward as number);
    components = typeof v === 'number' ? {} : ((v as { components?: Record<string, number> } | null)?.components ?? {});
    if (typeof v !== 'number' && (typeof v !== 'object' || v === null || typeof components !== 'object' || components === null))
      throw new TaskError('reward', `returned ${describe(v)} on ${where}; return a number or {reward, components}`);
  } else {
    reward = 0;
    for (const c of r) {
      const v = await call(`reward component "${c.name}"`, () => c.fn(input));
      if (typeof v !== 'number' || !Number.isFinite(v))
        throw new TaskError(`reward component "${c.name}"`, `returned ${describe(v)} on ${where}; rewards must be finite numbers`);
      components[c.name] = v;
      reward += c.weight * v;
    }
  }
  if (typeof reward !== 'number' || !Number.isFinite(reward))
    throw new TaskError('reward', `returned ${describe(reward)} on ${where}; rewards must be finite numbers`);
  for (const [k, v] of Object.entries(components))
    if (typeof v !== 'number' || !Number.isFinite(v))
      throw new TaskError('reward', `component "${k}" is ${describe(v)} on ${where}; components must be finite numbers`);
  const p = ctx.config.reward_processor;
  if (p) {
    reward = reward * p.scale + p.shift;
    if (p.clamp_min !== null) reward = Math.max(p.clamp_min, reward);
    if (p.clamp_max !== null) reward = Math.min(p.clamp_max, reward);
  }
  if (ctx.task.rewardProcessor) {
    const processor = ctx.task.rewardProcessor;
    reward = await call('rewardProcessor', () => processor(reward));
    if (typeof reward !== 'number' || !Number.isFinite(reward)) throw new TaskError('rewardProcessor', `returned ${describe(reward)} on ${where}`);
  }
  return { reward, components };
}

export async function callTransition<Item>(
  ctx: TaskContext<Item>,
  item: Item,
  turn: number,
  completions: string[],
  promptHistory: string[][],
  responseHistory: string[][],
): Promise<string[]> {
  const transition = ctx.task.transition;
  if (!transition) throw new TaskError('transition', 'num_turns > 1 needs a transition');
  const N = ctx.formatters.length;
  const original = (item as { prompt?: unknown } | null)?.prompt;
  const out: unknown = await settle(ctx.task, 'transition', `item ${ctx.itemIndex}, turn ${turn}`, () =>
    transition({ prompt: typeof original === 'string' ? original : '', completions, numAgents: N, promptHistory, responseHistory, item, turn }),
  );
  if (!Array.isArray(out) || out.length !== N || out.some((p) => typeof p !== 'string')) {
    const got = Array.isArray(out) ? `[${out.slice(0, 8).map(describe).join(', ')}${out.length > 8 ? ', …' : ''}]` : describe(out);
    throw new TaskError('transition', `must return ${N} prompt strings (one per agent) on item ${ctx.itemIndex}, turn ${turn}; got ${got}`);
  }
  return [...out];
}

/** env_step += K at each node, in depth-first pre-order (as CoMLRL's `_train_step_returns`). Returns the total. */
function numberEnvSteps(node: TreeNode, before: number): number {
  let step = before + node.joint.length;
  node.envStep = step;
  for (const child of node.children) if (child) step = numberEnvSteps(child, step);
  return step;
}

/** R^k = r^k + γ · mean(child returns), bottom-up (CoMLRL `compute_returns`). */
export function computeReturns(node: TreeNode, gamma: number): number[] {
  const childReturns = node.children.map((c) => (c ? computeReturns(c, gamma) : null));
  node.returns = jointReturns(node.rewards, childReturns, gamma);
  return node.returns;
}

/** Every node, post-order (children before parents), as the reference collects samples. */
export function postOrder(node: TreeNode, out: TreeNode[] = []): TreeNode[] {
  for (const c of node.children) if (c) postOrder(c, out);
  out.push(node);
  return out;
}

/** The last env step used by a tree. */
export function lastEnvStep(node: TreeNode): number {
  return Math.max(node.envStep, ...node.children.map((c) => (c ? lastEnvStep(c) : 0)));
}
