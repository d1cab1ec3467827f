/**
 * A cooperative two-agent task: agent 0 starts a sentence about a topic, agent 1 finishes it.
 * Neither sees the other's text; one joint reward scores the pair (MAGRPO trains both on it).
 * Edit the data, the prompts and the reward; `magrpo train config.yaml` picks the changes up.
 */
import type { RewardInput, Task } from 'magrpo';

interface Item {
  topic: string;
}

const TOPICS = ['the sea', 'a whale', 'the ship', 'the storm', 'the harbour', 'the captain', 'a rope', 'the moon', 'the island', 'a lantern'];

const words = (s: string) => s.toLowerCase().match(/[a-z']+/g) ?? [];

/** Named reward parts, each in [0, 1]; the dashboard charts them separately. */
const bothWrote = ({ completions }: RewardInput<Item>) => (completions.every((c) => words(c).length > 0) ? 1 : 0);
const balanced = ({ completions }: RewardInput<Item>) => {
  const [a, b] = completions.map((c) => words(c).length);
  return Math.max(a, b) === 0 ? 0 : Math.min(a, b) / Math.max(a, b);
};
const onTopic = ({ completions, item }: RewardInput<Item>) => {
  const key = words(item.topic).pop() ?? '';
  return completions.filter((c) => words(c).includes(key)).length / completions.length;
};

export const task: Task<Item> = {
  name: 'two-halves',
  dataset: TOPICS.slice(0, 8).map((topic) => ({ topic })),
  evalDataset: TOPICS.slice(8).map((topic) => ({ topic })),
  // One prompt per agent, in agent order.
  formatters: [
    (item) => `Write the first half of a sentence about ${item.topic}:`,
    (item) => `Write the second half of a sentence about ${item.topic}:`,
  ],
  // total = Σ weight · component; components are logged as turn_1/reward/<name>.
  reward: [
    { name: 'both_wrote', weight: 0.4, fn: bothWrote },
    { name: 'balanced', weight: 0.3, fn: balanced },
    { name: 'on_topic', weight: 0.3, fn: onTopic },
  ],
};

export default task;
