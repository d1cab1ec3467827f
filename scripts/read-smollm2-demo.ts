import { postText, tldrEnvironment } from '../src/envs/writing/index.js';
import { loadLora } from '../src/model/lora.js';
import { LanguageModel } from '../src/model/pretrained.js';
import { echo, faithfulness } from '../src/text/faithfulness.js';

/**
 * Greedy answers of the untrained and the trained pair of a SmolLM2 demo run to the first 10 eval
 * posts, with each answer's content-word support and the pair's echo (read next to the reward).
 *   npx tsx scripts/read-smollm2-demo.ts <run-dir>   (results/demo-tldr-smollm2-trial/greedy-10-items.txt)
 */
const RUN = process.argv[2];
if (!RUN) throw new Error('usage: npx tsx scripts/read-smollm2-demo.ts <run-dir>');
const GGUF = `${process.env.HOME}/.cache/magrpo/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf`;
const env = tldrEnvironment({ prompt_style: 'chat' });
const task = env.task();
const items = env.defaultSplits().eval.slice(0, 10);
const base = LanguageModel.load(GGUF);
const trained = [0, 1].map((i) => {
  const lm = LanguageModel.load(GGUF);
  loadLora(lm.model, `${RUN}/final/agent_${i}/adapter`);
  return lm;
});
const f = task.formatters as ((x: unknown) => unknown)[];
for (const [n, item] of items.entries()) {
  const post = postText(item.prompt);
  console.log(`\n=== item ${n + 1}: ${JSON.stringify(post.slice(0, 160))}…`);
  const outs: Record<string, string[]> = {};
  for (const [label, models] of [
    ['untrained', [base, base]],
    ['trained', trained],
  ] as const) {
    outs[label] = [0, 1].map((i) => {
      const prompt = models[i].tokenizer.applyChatTemplate(f[i](item) as never, { addGenerationPrompt: true });
      return models[i].sample([prompt], { maxNewTokens: 64, temperature: 0, rng: 1 })[0].text;
    });
    const fa = outs[label].map((t) => faithfulness(t, post).content_support.toFixed(2));
    console.log(`[${label}] support ${fa.join('/')} echo ${echo(outs[label][0], outs[label][1]).toFixed(2)}`);
    for (const i of [0, 1]) console.log(`  a${i}: ${JSON.stringify(outs[label][i].slice(0, 300))}`);
  }
}
