/**
 * MAAC, multi-agent actor-critic with one shared centralized critic (CoMLRL
 * comlrl/trainers/actor_critic/maac.py; centralized critic, decentralized actors: Lowe et al.,
 * MADDPG, NeurIPS 2017, and Foerster et al., COMA, AAAI 2018). Each agent i is an actor π_i on its
 * own model; one critic model for the team (rl/critics.ts) reads the joint prompt
 *
 *   x(h)    = "[Agent 0] h_0\n\n[Agent 1] h_1 …"                                 critic_type v
 *   x(h, a) = x(h) + "\n\n[Joint Action]\n\n[Agent 0 action]\na_0\n\n[Agent 1 action]\na_1 …"   q
 *
 * (the reference's formatting) and gives V = w · hidden(x)[last] + b. Per joint action k of a node
 * (aligned: agent i's completion k):
 *
 *   V_old    the critic's value of x at sampling time
 *   t_i      r_i + γ · V_old(x') with x' the next turn's joint input of the trajectory, r_i at the
 *            last turn; r_i = r − β·KL_i(y_i) with reward-shaping reference KL, else r     TD(0)
 *   A_i      t_i − V_old, z-scored over agent i's turn group of a drained buffer
 *   L_i      mean_batch [ −A_i · Σ_t log π_i(y_i,t | h_i, y_i,<t) ]      (+ β·Σ_t k3_t, KL loss mode)
 *   L_critic value_loss_coef · mean_batch (mean_i t_i − V)²
 *
 * one AdamW step per minibatch for each actor, and one for the critic per minibatch of joint
 * actions at critic_learning_rate. The reference steps the shared critic once per agent's
 * minibatch, on each agent's copy of the same joint samples (docs/differences.md).
 */
import type { Algorithm, KeyProblem, LossSample, ScoredNode } from './algorithm.js';
import { type ActorCriticConfig, actorCriticLoss, actorCriticSamples, IAC_OPTIONS, normalizeAdvantages, REFERENCE_KL_OPTIONS } from './iac.js';
import { MAGRPO_OPTIONS } from './magrpo.js';

/** The joint prompt the shared critic reads (CoMLRL MAACTrainer._build_critic_input), with the joint action for a Q critic. */
export function jointCriticText(prompts: readonly string[], actions: readonly string[] | null): string {
  const base = prompts.map((p, i) => `[Agent ${i}] ${p}`).join('\n\n');
  if (actions === null) return base;
  return `${base}\n\n${['[Joint Action]', ...actions.map((a, i) => `[Agent ${i} action]\n${a}`)].join('\n\n')}`;
}

type MaacOptions = {
  critic_type: 'v' | 'q';
  value_loss_coef: number;
  critic_learning_rate: number | null;
  advantage_normalization: boolean;
} & ActorCriticConfig;

/**
 * Every agent's samples at a node: actor-critic samples against the joint V_old, their critic
 * terms replaced by the joint ones: the joint input, V_old and the mean over agents of t_i (what
 * the reference's N critic steps per minibatch regress to, in one step).
 */
export function maacSamples(node: ScoredNode, c: ActorCriticConfig): LossSample[][] {
  const joint = node.jointCritic;
  if (!joint) throw new Error(`maac: no shared critic values at turn ${node.turn + 1}`);
  const perAgent = node.groups.map((_, i) => actorCriticSamples(node, i, c));
  return perAgent.map((samples, i) =>
    samples.map((s, g) => {
      const k = node.joint.findIndex((idx) => idx[i] === g);
      const target = perAgent.reduce((acc, a, j) => acc + (a[node.joint[k][j]].critic?.targets[0] as number), 0) / perAgent.length;
      return { ...s, critic: { oldValues: [joint.values[k]], targets: [target], inputs: [joint.inputs[k]] } };
    }),
  );
}

export const MAAC_OPTIONS = {
  critic_type: IAC_OPTIONS.critic_type,
  value_loss_coef: IAC_OPTIONS.value_loss_coef,
  critic_learning_rate: IAC_OPTIONS.critic_learning_rate,
};

export const MAAC: Algorithm<MaacOptions> = {
  name: 'maac',
  options: { ...MAAC_OPTIONS, advantage_normalization: MAGRPO_OPTIONS.advantage_normalization, ...REFERENCE_KL_OPTIONS },
  // The reference's MAACConfig defaults where they differ from the shared keys' (MAGRPOConfig's).
  defaults: () => ({ num_generations: 1, rollout_buffer_size: 8, num_train_epochs: 40 }),
  schedule: 'online',
  check(c) {
    const out: KeyProblem[] = [];
    const no = (path: string[], message: string) => out.push({ path, message });
    if (c.num_turns > 1 && c.num_generations !== 1)
      no(
        ['num_generations'],
        `multi-turn maac samples one joint action per turn (the TD target reads the next turn's joint value): set num_generations 1, got ${c.num_generations}`,
      );
    if (c.joint_mode !== 'aligned' && c.num_generations > 1) no(['joint_mode'], 'maac rewards aligned joint actions: set joint_mode aligned');
    return out;
  },
  samples: (node, c) => maacSamples(node, c),
  samplesPerNode: (c) => c.num_generations,
  // The actors carry no value head: the team's critic is a model of its own.
  critic: () => null,
  criticModel: (c) => ({ shared: true, type: c.critic_type, valueClipRange: null, valueLossCoef: c.value_loss_coef, lr: c.critic_learning_rate }),
  prepareBatch: (samples, c) => (c.advantage_normalization ? normalizeAdvantages(samples) : [...samples]),
  loss: actorCriticLoss,
};
