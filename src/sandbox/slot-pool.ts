/**
 * Counting semaphore that hands out numbered slots 0..size-1.
 * The slot number matters: each slot runs as its own uid, so RLIMIT_NPROC (counted per uid)
 * of one execution never eats into another's.
 */
export class SlotPool {
  private readonly free: number[];
  private readonly waiters: ((slot: number) => void)[] = [];

  constructor(readonly size: number) {
    this.free = Array.from({ length: size }, (_, i) => size - 1 - i);
  }

  acquire(): Promise<number> {
    const slot = this.free.pop();
    if (slot !== undefined) return Promise.resolve(slot);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  release(slot: number): void {
    const next = this.waiters.shift();
    if (next) next(slot);
    else this.free.push(slot);
  }

  /** Runs `task` holding a slot, releasing it however the task ends. */
  async with<T>(task: (slot: number) => Promise<T>): Promise<T> {
    const slot = await this.acquire();
    try {
      return await task(slot);
    } finally {
      this.release(slot);
    }
  }
}
