/**
 * What the environments' option schemas share. Each environment declares its options once, as a
 * zod object in its own `options.ts` that imports nothing heavy: config files are validated (and
 * the JSON Schema is generated) from it without loading the environment, and the environment's
 * option types are its z.input (what a caller gives) and z.output (defaults filled in).
 */
import { z } from 'zod';
import { ConfigError, formatIssues } from '../rl/config.js';

export const dataDirOption = z.string().min(1).optional().describe('folder with <name>.train.jsonl.gz and <name>.eval.jsonl.gz (default: the shipped data)');

/** Validates an environment's options and fills in the defaults; a bad one throws ConfigError naming the key. */
export function readOptions<S extends z.ZodObject>(schema: S, options: unknown, env: string): z.output<S> {
  const r = schema.safeParse(options ?? {}, { reportInput: true });
  if (r.success) return r.data;
  throw new ConfigError(
    formatIssues(r.error, () => Object.keys(schema.shape)),
    `${env} options`,
  );
}
