// magrpo's TL;DR reward (src/envs/writing/rewards.ts, from the compiled dist/) for the Python
// peers of `magrpo bench --step --peers` (scripts/bench_step_peers.py): reads one JSON line
// [summary, detailed] per call on stdin, answers {"reward": r, "components": {...}} per line.
import { createInterface } from 'node:readline';
import { tldrReward } from '../dist/src/envs/writing/rewards.js';

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  const [c1, c2] = JSON.parse(line);
  process.stdout.write(`${JSON.stringify(tldrReward(c1, c2))}\n`);
}
