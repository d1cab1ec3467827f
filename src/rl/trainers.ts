/**
 * One trainer class per algorithm, named as the reference library (and TRL) name them, for code
 * ported from there. Each is MAGRPOTrainer, the one loop, with `trainer.algorithm` set:
 * `new MADPOTrainer({ task, model, config })` is
 * `new MAGRPOTrainer({ task, model, config: { ...config, algorithm: 'madpo' } })`.
 */
import type { AlgorithmName } from './algorithms/index.js';
import { ConfigError } from './config.js';
import { IterativePreferenceTrainer } from './iterative.js';
import { MAGRPOTrainer, type TrainerOptions } from './trainer.js';

/** The options with `algorithm` set; a config naming another algorithm is an error naming the key. */
function withAlgorithm<Item>(o: TrainerOptions<Item>, algorithm: AlgorithmName, cls: string): TrainerOptions<Item> {
  const set = (o.config as { algorithm?: unknown } | undefined)?.algorithm;
  if (set !== undefined && set !== algorithm)
    throw new ConfigError([
      { path: 'algorithm', message: `${cls} trains with algorithm ${algorithm}, got ${JSON.stringify(set)}; use MAGRPOTrainer to choose by config` },
    ]);
  return { ...o, config: { ...o.config, algorithm } };
}

export class MAREINFORCETrainer<Item> extends MAGRPOTrainer<Item> {
  constructor(o: TrainerOptions<Item>) {
    super(withAlgorithm(o, 'mareinforce', 'MAREINFORCETrainer'));
  }
}

export class MARLOOTrainer<Item> extends MAGRPOTrainer<Item> {
  constructor(o: TrainerOptions<Item>) {
    super(withAlgorithm(o, 'marloo', 'MARLOOTrainer'));
  }
}

export class MAReMaxTrainer<Item> extends MAGRPOTrainer<Item> {
  constructor(o: TrainerOptions<Item>) {
    super(withAlgorithm(o, 'maremax', 'MAReMaxTrainer'));
  }
}

export class CentralizedMAGRPOTrainer<Item> extends MAGRPOTrainer<Item> {
  constructor(o: TrainerOptions<Item>) {
    super(withAlgorithm(o, 'centralized_magrpo', 'CentralizedMAGRPOTrainer'));
  }
}

export class MADPOTrainer<Item> extends MAGRPOTrainer<Item> {
  constructor(o: TrainerOptions<Item>) {
    super(withAlgorithm(o, 'madpo', 'MADPOTrainer'));
  }
}

export class IACTrainer<Item> extends MAGRPOTrainer<Item> {
  constructor(o: TrainerOptions<Item>) {
    super(withAlgorithm(o, 'iac', 'IACTrainer'));
  }
}

export class MAACTrainer<Item> extends MAGRPOTrainer<Item> {
  constructor(o: TrainerOptions<Item>) {
    super(withAlgorithm(o, 'maac', 'MAACTrainer'));
  }
}

/**
 * MARLHF (CoMLRL `MARLHFTrainer`): any online algorithm (`algorithm`, the reference's
 * `rl_algorithm`; magrpo by default) trained on a joint reward model's reward instead of the
 * task's. The reward model is trained first (`magrpo reward-model`, rl/reward-model.ts) and named
 * by `reward_model`, which this class requires.
 */
export class MARLHFTrainer<Item> extends MAGRPOTrainer<Item> {
  constructor(o: TrainerOptions<Item>) {
    const rm = (o.config as { reward_model?: unknown } | undefined)?.reward_model;
    if (typeof rm !== 'string')
      throw new ConfigError([
        {
          path: 'reward_model',
          message: 'MARLHFTrainer trains on a reward model: set reward_model to the folder `magrpo reward-model` (or trainRewardModel and save) wrote',
        },
      ]);
    super(o);
  }
}

/** The options with `iterative` set ({}: the reference's defaults) unless the config sets it. */
function iterative<Item>(o: TrainerOptions<Item>): TrainerOptions<Item> {
  const set = (o.config as { iterative?: unknown } | undefined)?.iterative;
  return set === undefined || set === null ? { ...o, config: { ...o.config, iterative: {} } } : o;
}

/**
 * Iterative MADPO (CoMLRL `MADPOIterTrainer`): rounds of fresh comparison pairs against a
 * comparator policy, replayed, each round DPO epochs on them (rl/iterative.ts). `iterative`
 * defaults to {} (six iterations against the current team).
 */
export class MADPOIterTrainer<Item> extends IterativePreferenceTrainer<Item> {
  constructor(o: TrainerOptions<Item>) {
    super(iterative(withAlgorithm(o, 'madpo', 'MADPOIterTrainer')));
  }
}

/**
 * Iterative MARLHF (CoMLRL `MARLHFIterTrainer`): rounds of fresh comparison pairs, a reward model
 * trained afresh on the replayed ones, then the online algorithm (`algorithm`, magrpo by default)
 * on its reward (rl/iterative.ts).
 */
export class MARLHFIterTrainer<Item> extends IterativePreferenceTrainer<Item> {
  constructor(o: TrainerOptions<Item>) {
    if ((o.config as { algorithm?: unknown } | undefined)?.algorithm === 'madpo')
      throw new ConfigError([
        { path: 'algorithm', message: 'MARLHFIterTrainer runs an online algorithm on its reward model; iterative madpo is MADPOIterTrainer' },
      ]);
    super(iterative(o));
  }
}

/** The trainer a config asks for: an iterative one when `iterative` is set, else MAGRPOTrainer (any algorithm). */
export function createTrainer<Item>(o: TrainerOptions<Item>): MAGRPOTrainer<Item> {
  const set = (o.config as { iterative?: unknown } | undefined)?.iterative;
  return set === undefined || set === null ? new MAGRPOTrainer(o) : new IterativePreferenceTrainer(o);
}
