/**
 * The architecture registry: one entry per architecture (architecture.ts says what an entry
 * holds). Adding an architecture is a module (model/<name>.ts) with its config type in
 * model/config.ts, an entry file here, and a line below (CONTRIBUTING.md has the checklist).
 */
import type { Architecture, GgufArchitecture } from '../architecture.js';
import type { ModelConfig } from '../config.js';
import { gpt2 } from './gpt2.js';
import { llama } from './llama.js';

export const ARCHITECTURES: readonly Architecture[] = [llama, gpt2];

/** The entry that builds `config`. */
export function architectureOf(config: ModelConfig): Architecture {
  const a = ARCHITECTURES.find((x) => x.family === config.arch);
  if (a === undefined) throw new Error(`no architecture entry for config.arch "${config.arch}"`);
  return a;
}

/** The entry that reads llama.cpp's architecture `name`, if any. */
export function architectureForGguf(name: string): Architecture | undefined {
  return ARCHITECTURES.find((x) => (x.gguf.names as readonly string[]).includes(name));
}

/** llama.cpp architectures that can be read. */
export const GGUF_ARCHITECTURES: readonly GgufArchitecture[] = ARCHITECTURES.flatMap((a) => a.gguf.names);
