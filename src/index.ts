/** magrpo's public API. */

export { Rng } from './engine/rng.js';
export { type BackendName, backend, setBackend } from './engine/runtime.js';
export type { Baseline, Environment, EpisodeResult } from './envs/environment.js';
export { createModel, loadModel, saveModel } from './model/load.js';
export { applyLora, type LoraConfig, loadLora, mergeLora, saveLora } from './model/lora.js';
export { LanguageModel, type TextSample, type TextSampleOptions } from './model/pretrained.js';
export { VALUE_HEAD_FILE, ValueHead } from './model/value-head.js';
export { TAGGED_ADAPTER } from './rl/algorithms/centralized.js';
export { ALGORITHM_NAMES, type AlgorithmName } from './rl/algorithms/index.js';
export type { TrainerCallback } from './rl/callbacks.js';
export { ConfigError, type MagrpoConfig, type MagrpoConfigInput, MagrpoConfigSchema, resolveConfig } from './rl/config.js';
export { CsvSink, JsonlSink, MemorySink, type MetricsSink } from './rl/metrics.js';
export {
  type CentralAdapter,
  type ChatMessage,
  type EvalEpisode,
  type Formatter,
  type Prompt,
  promptText,
  type RewardComponent,
  type RewardFn,
  type RewardInput,
  type RewardValue,
  type Task,
  type Transition,
  type TransitionInput,
} from './rl/task.js';
export { TensorBoardSink } from './rl/tensorboard.js';
export { MAGRPOTrainer, type NodeSample, type TrainerOptions, type TrainOptions } from './rl/trainer.js';
export { CentralizedMAGRPOTrainer, IACTrainer, MADPOTrainer, MAREINFORCETrainer, MAReMaxTrainer, MARLOOTrainer } from './rl/trainers.js';
export { runDemo } from './run/demo.js';
export { type EvalReport, evaluateTarget } from './run/evaluate.js';
export { RUN_FILES, readJsonl } from './run/run-dir.js';
export { type RunReport, type TrainRunOptions, trainRun } from './run/train.js';
export { PythonSandbox } from './sandbox/index.js';
