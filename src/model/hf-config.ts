/**
 * Hugging Face `config.json` <-> `ModelConfig`, through the architecture registry: the
 * `architectures` class (or, without one, `model_type`) picks the entry, model/config.ts reads and
 * writes the keys every architecture shares, the entry its own (architecture.ts `config`).
 */
import { join } from 'node:path';
import type { Architecture } from './architecture.js';
import { ARCHITECTURES, architectureOf } from './architectures/index.js';
import { writeFileAtomic } from './atomic-write.js';
import { commonHfFields, FieldReader, isRecord, type ModelConfig, readJson } from './config.js';
import { CheckpointError } from './errors.js';

/** The model config of a Hugging Face model folder (its config.json). */
export function readModelConfig(dir: string): ModelConfig {
  const file = join(dir, 'config.json');
  return parseModelConfig(readJson(file, 'point to a Hugging Face model folder (it must contain config.json)'), file);
}

/** Writes `cfg` as the folder's config.json, as transformers would. */
export function writeModelConfig(dir: string, cfg: ModelConfig): void {
  writeFileAtomic(join(dir, 'config.json'), [`${JSON.stringify(toHfConfig(cfg), null, 2)}\n`]);
}

/** The model config of a parsed config.json; every problem is listed in one CheckpointError. `file` only names the source in error messages. */
export function parseModelConfig(json: unknown, file = 'config.json'): ModelConfig {
  if (!isRecord(json)) throw new CheckpointError('BAD_CONFIG', file, 'top level is not a JSON object', "replace it with the model's config.json");
  const { entry, modelType } = resolveModelType(json, file);
  const f = new FieldReader(json);
  const cfg = entry.config.read(f, modelType);
  f.throwIfAny(file);
  return cfg;
}

/** The config.json transformers would write for `cfg`; parseModelConfig(toHfConfig(cfg)) deep-equals cfg. */
export function toHfConfig(cfg: ModelConfig): Record<string, unknown> {
  const entry = architectureOf(cfg);
  const className = Object.keys(entry.config.classes).find((c) => entry.config.classes[c] === cfg.modelType);
  if (className === undefined) throw new Error(`the ${entry.family} entry has no transformers class for model_type "${cfg.modelType}"`);
  return { ...commonHfFields(cfg, className), ...entry.config.write(cfg) };
}

/** The entry and model type config.json names: its `architectures[0]` class, else its `model_type`. */
function resolveModelType(json: Record<string, unknown>, file: string): { entry: Architecture; modelType: string } {
  const classes = ARCHITECTURES.flatMap((entry) => Object.entries(entry.config.classes).map(([name, modelType]) => ({ name, modelType, entry })));
  const supported = classes.map((c) => c.name).join(', ');
  const { architectures, model_type: modelType } = json;
  if (Array.isArray(architectures) && architectures.length > 0) {
    const arch = architectures[0];
    const known = classes.find((c) => c.name === arch);
    if (known === undefined) {
      throw new CheckpointError(
        'UNKNOWN_ARCHITECTURE',
        file,
        `architecture ${JSON.stringify(arch)} is not supported; supported: ${supported}`,
        'use a checkpoint of a supported architecture',
      );
    }
    if (modelType !== undefined && modelType !== known.modelType) {
      throw new CheckpointError(
        'BAD_CONFIG',
        file,
        `model_type: got ${JSON.stringify(modelType)}, expected "${known.modelType}" for ${arch}`,
        'make model_type match architectures',
      );
    }
    return known;
  }
  const byType = classes.find((c) => c.modelType === modelType);
  if (byType !== undefined) return byType;
  throw new CheckpointError(
    'UNKNOWN_ARCHITECTURE',
    file,
    `no supported "architectures" entry or model_type (got model_type ${JSON.stringify(modelType)}); supported: ${supported}`,
    'use a checkpoint of a supported architecture',
  );
}
