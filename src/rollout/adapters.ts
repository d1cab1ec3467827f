/**
 * Hot-loading of versioned LoRA adapters on every server of a pool, through vLLM's runtime LoRA
 * endpoints (docs.vllm.ai, "Dynamically serving LoRA Adapters"): POST /v1/load_lora_adapter
 * {lora_name, lora_path}, POST /v1/unload_lora_adapter {lora_name}. Each version gets its own name
 * (agent_<i>-v<step>) and folder; the new one is loaded everywhere before the old one is
 * unloaded, and requests name the version they want, so no request mixes weights. The folder must
 * be readable by the servers under the same path (shared storage when they run elsewhere).
 */
import { rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { RolloutError, type ServerPool } from './pool.js';

export class AdapterLoader {
  private current: { name: string; dir: string } | null = null;
  /** Every load and unload sent, in order (name and the servers that took it): for logs and tests. */
  readonly history: { op: 'load' | 'unload'; name: string; servers: string[] }[] = [];

  constructor(
    private readonly pool: ServerPool,
    private readonly root: string,
    private readonly deleteOld: boolean,
    private readonly log: (message: string) => void,
  ) {}

  /** The adapter version requests should name (null before the first publish). */
  get name(): string | null {
    return this.current?.name ?? null;
  }

  /** Writes version `name` with `write(dir)`, loads it on every live server, then unloads the previous version. */
  async publish(name: string, write: (dir: string) => void): Promise<void> {
    if (!/^[\w.-]+$/.test(name)) throw new Error(`adapter name "${name}" must be letters, digits, _ . - only`);
    if (this.current?.name === name) return;
    const dir = resolve(join(this.root, name));
    write(dir);
    const body = { lora_name: name, lora_path: dir };
    let loaded: string[];
    try {
      loaded = await this.pool.postEach('/v1/load_lora_adapter', body);
    } catch (e) {
      if (!alreadyLoaded(e)) throw e;
      // Left by an earlier run on the same servers (or by this run before a resume): its weights may
      // differ, so it is unloaded everywhere (a 404 where it was not loaded is fine) and loaded again.
      this.log(`${e.server}: an adapter named ${name} was already loaded (by an earlier run?); unloading it and loading this run's ${dir}`);
      await this.pool.postEach('/v1/unload_lora_adapter', { lora_name: name }).catch((u: unknown) => {
        if (!(u instanceof RolloutError) || u.kind !== 'not_found') throw u;
      });
      loaded = await this.pool.postEach('/v1/load_lora_adapter', body);
    }
    this.history.push({ op: 'load', name, servers: loaded });
    const previous = this.current;
    this.current = { name, dir };
    if (previous) await this.unload(previous);
  }

  /** Unloads a version everywhere; a server that no longer knows it is fine (it may have restarted). */
  private async unload(v: { name: string; dir: string }): Promise<void> {
    try {
      const servers = await this.pool.postEach('/v1/unload_lora_adapter', { lora_name: v.name });
      this.history.push({ op: 'unload', name: v.name, servers });
    } catch (e) {
      if (!(e instanceof RolloutError) || (e.kind !== 'not_found' && e.kind !== 'bad_request')) throw e;
      this.log(`warning: unloading adapter ${v.name}: ${e.message}`);
    }
    if (this.deleteOld) rmSync(v.dir, { recursive: true, force: true });
  }
}

/** vLLM's (and magrpo serve's) 400 for a name in use: "The lora adapter 'x' has already been loaded." */
function alreadyLoaded(e: unknown): e is RolloutError {
  return e instanceof RolloutError && e.kind === 'bad_request' && /already been loaded/i.test(e.message);
}
