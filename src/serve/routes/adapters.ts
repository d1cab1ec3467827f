/** POST /v1/load_lora_adapter and /v1/unload_lora_adapter: vLLM's bodies and answers. */
import type { Route } from '../context.js';
import { HttpError, sendText } from '../http.js';
import { LoadLoraRequest, UnloadLoraRequest } from '../protocol.js';
import { parseBody } from '../validate.js';

/** A PEFT folder served as `lora_name`; 400 if the name is taken or the folder is not an adapter for this model. */
export const loadLoraAdapter: Route = (ctx, res, raw) => {
  const body = parseBody(LoadLoraRequest, raw);
  if (ctx.engine.hasModel(body.lora_name))
    throw new HttpError(400, `The lora adapter '${body.lora_name}' has already been loaded.`, 'InvalidUserInput', 'lora_name');
  try {
    ctx.engine.loadAdapter(body.lora_name, body.lora_path);
  } catch (e) {
    throw new HttpError(400, `lora_path: ${(e as Error).message}`, 'InvalidUserInput', 'lora_path');
  }
  sendText(res, 200, `Success: LoRA adapter '${body.lora_name}' added successfully.`);
};

/** 400 for the base model's name, 404 for a name not loaded. */
export const unloadLoraAdapter: Route = (ctx, res, raw) => {
  const body = parseBody(UnloadLoraRequest, raw);
  if (body.lora_name === ctx.modelName) throw new HttpError(400, `'${body.lora_name}' is the base model, not an adapter`, 'InvalidUserInput', 'lora_name');
  if (!ctx.engine.unloadAdapter(body.lora_name))
    throw new HttpError(404, `The lora adapter '${body.lora_name}' cannot be found.`, 'NotFoundError', 'lora_name', 'model_not_found');
  sendText(res, 200, `Success: LoRA adapter '${body.lora_name}' removed successfully.`);
};
