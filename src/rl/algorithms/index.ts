/** Every algorithm, by its `trainer.algorithm` name (docs/algorithms.md). */
import type { Algorithm } from './algorithm.js';
import { CENTRALIZED_MAGRPO, CENTRALIZED_OPTIONS } from './centralized.js';
import { IAC, IAC_OPTIONS } from './iac.js';
import { MAAC, MAAC_OPTIONS } from './maac.js';
import { MADPO, MADPO_OPTIONS } from './madpo.js';
import { MAGRPO, MAGRPO_OPTIONS, MAREINFORCE, MAREMAX, MARLOO } from './magrpo.js';

export const ALGORITHM_NAMES = ['magrpo', 'mareinforce', 'marloo', 'maremax', 'centralized_magrpo', 'madpo', 'iac', 'maac'] as const;
export type AlgorithmName = (typeof ALGORITHM_NAMES)[number];

export const ALGORITHMS: Readonly<Record<AlgorithmName, Algorithm>> = {
  magrpo: MAGRPO,
  mareinforce: MAREINFORCE,
  marloo: MARLOO,
  maremax: MAREMAX,
  centralized_magrpo: CENTRALIZED_MAGRPO,
  madpo: MADPO,
  iac: IAC,
  maac: MAAC,
};

/** The algorithm of a name (absent: magrpo); an unknown name is an error listing the known ones. */
export function algorithmNamed(name: string | undefined): Algorithm {
  const a = ALGORITHMS[(name ?? 'magrpo') as AlgorithmName];
  if (!a) throw new Error(`unknown algorithm "${name}"; one of ${ALGORITHM_NAMES.join(', ')}`);
  return a;
}

/** Every algorithm's own keys, merged flat into the trainer section (the MAGRPO family shares one set; IAC and MAAC share advantage_normalization and the reference-KL keys, MAAC IAC's critic keys). */
export const ALGORITHM_OPTIONS = { ...MAGRPO_OPTIONS, ...CENTRALIZED_OPTIONS, ...MADPO_OPTIONS, ...IAC_OPTIONS, ...MAAC_OPTIONS };

/** The algorithms whose own keys include `key` (empty for a shared key). */
export function ownersOf(key: string): AlgorithmName[] {
  return ALGORITHM_NAMES.filter((n) => Object.hasOwn(ALGORITHMS[n].options, key));
}
