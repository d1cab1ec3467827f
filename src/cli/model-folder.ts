/**
 * Model folder arguments (`sample -m`, `init --model`): checked before use, with the folder that
 * would work when the user points at a run's agent folder instead of its model/ inside.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { isGgufFile } from '../model/gguf-import.js';
import { findPullable, resolvePulled } from '../model/pull.js';
import { didYouMean } from '../rl/config.js';
import { CLI } from './options.js';

const isModel = (dir: string) => existsSync(join(dir, 'config.json'));

/** Model folders under `dir` (breadth first, at most `depth` levels down), nearest first. */
function modelsUnder(dir: string, depth: number, limit = 3): string[] {
  const found: string[] = [];
  let level = [dir];
  for (let d = 0; d < depth && found.length < limit && level.length; d++) {
    const next: string[] = [];
    for (const parent of level) {
      let names: string[] = [];
      try {
        names = readdirSync(parent).sort();
      } catch {
        continue; // unreadable: not a place to look
      }
      for (const name of names) {
        const p = join(parent, name);
        if (name === 'node_modules' || name.startsWith('.') || !statSync(p, { throwIfNoEntry: false })?.isDirectory()) continue;
        if (isModel(p)) found.push(p);
        else next.push(p);
      }
    }
    level = next;
  }
  return found.slice(0, limit);
}

/**
 * The model a `-m` argument names: a Hugging Face-format folder, a GGUF file, or the name of a
 * pulled model (`magrpo pull`). Throws an error naming `flag`, the path and the fix otherwise.
 */
export function checkModelFolder(dir: string, flag: string): string {
  if (!existsSync(dir) && findPullable(dir)) return resolvePulled(dir);
  if (isGgufFile(dir)) return dir;
  if (!existsSync(dir)) {
    const parent = dirname(dir);
    const near = existsSync(parent) ? didYouMean(basename(dir), readdirSync(parent)) : null;
    throw new Error(`${flag}: ${dir} does not exist${near ? ` — did you mean ${join(parent, near)}?` : ''}`);
  }
  if (!statSync(dir).isDirectory())
    throw new Error(`${flag}: ${dir} is a file but not a GGUF file; give the model folder (the one with config.json) or a .gguf file`);
  if (isModel(dir)) return dir;
  if (existsSync(join(dir, 'adapter')) && !existsSync(join(dir, 'model')))
    throw new Error(
      `${flag}: ${dir} holds a LoRA adapter (adapter/), not a model; evaluate it with \`${CLI} eval <run-dir>\`, which loads it on its base model`,
    );
  const found = modelsUnder(dir, 4);
  const hint = found.length ? `; the model folder${found.length > 1 ? 's' : ''} inside: ${found.join(', ')}` : '';
  throw new Error(`${flag}: ${dir} is not a model folder (no config.json)${hint}`);
}
