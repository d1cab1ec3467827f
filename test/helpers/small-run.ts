/**
 * A small run of configs/custom (2 agents, 4 items, 2 completions of ≤ 6 tokens, an update per
 * item), as `--set` overrides: the rollout-server tests train it against real servers.
 */
export const SMALL_RUN = [
  'env.train_size=4',
  'env.eval_size=1',
  'trainer.num_generations=2',
  'trainer.num_train_epochs=1',
  'trainer.max_new_tokens=6',
  'trainer.rollout_buffer_size=1',
  'trainer.eval_interval=0',
  'trainer.save_steps=0',
  'eval.at_end=false',
];
export const SMALL_RUN_ITEMS = 4;
/** LoRA adapters small enough for configs/custom's model (one adapter per agent and step). */
export const SMALL_RUN_LORA = 'trainer.lora={r: 2, alpha: 4, target_modules: [q_proj, v_proj]}';
