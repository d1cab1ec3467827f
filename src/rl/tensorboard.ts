/**
 * TensorBoard without TensorFlow: an `events.out.tfevents.*` file is a TFRecord stream of
 * `tensorflow.Event` protobufs. The npm options bundle TensorFlow's native library, so the few
 * messages we need are encoded here (read back by an independent Python reader in tests).
 *
 *   record = u64 length | u32 masked_crc32c(length bytes) | data | u32 masked_crc32c(data)
 *   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
 *   Summary { repeated Value value = 1; }
 *   Value   { string tag = 1; float simple_value = 2; TensorProto tensor = 8; SummaryMetadata metadata = 9; }
 *   SummaryMetadata { PluginData plugin_data = 1 { string plugin_name = 1; bytes content = 2; } }
 *
 * Scalars use simple_value. Text (the "text" plugin) is a DT_STRING tensor:
 *   TensorProto { DataType dtype = 1 (DT_STRING = 7); TensorShapeProto tensor_shape = 2; bytes string_val = 8; }
 * Hyperparameters (the "hparams" plugin, tensorboard/plugins/hparams/plugin_data.proto) are
 * two summaries with empty values whose plugin content is an HParamsPluginData message:
 *   HParamsPluginData { int32 version = 1; Experiment experiment = 2; SessionStartInfo session_start_info = 3; }
 *   Experiment { repeated HParamInfo hparam_infos = 4 { string name = 1; }; repeated MetricInfo metric_infos = 5 { MetricName name = 1 { string tag = 2; } } }
 *   SessionStartInfo { map<string, google.protobuf.Value> hparams = 1; double start_time_secs = 5; }
 *   google.protobuf.Value { double number_value = 2; string string_value = 3; bool bool_value = 4; }
 */
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { MetricsSink } from './metrics.js';

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** CRC-32C (Castagnoli), as TFRecord uses. */
export function crc32c(bytes: Uint8Array): number {
  let c = 0xffffffff;
  for (const b of bytes) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** TFRecord's masked CRC: rotate right by 15, add a constant (so CRCs of CRCs stay distinct). */
export function maskedCrc32c(bytes: Uint8Array): number {
  const c = crc32c(bytes);
  return (((c >>> 15) | (c << 17)) + 0xa282ead8) >>> 0;
}

function varint(n: number): number[] {
  const out: number[] = [];
  for (; n >= 0x80; n = Math.floor(n / 128)) out.push((n % 128) | 0x80);
  out.push(n);
  return out;
}

/** Field header + length-delimited payload. */
function lengthDelimited(field: number, payload: Uint8Array | number[]): number[] {
  return [(field << 3) | 2, ...varint(payload.length), ...payload];
}

const utf8 = (s: string) => Buffer.from(s, 'utf8');

function double(field: number, x: number): number[] {
  const b = Buffer.alloc(8);
  b.writeDoubleLE(x);
  return [(field << 3) | 1, ...b];
}

/** A summary value carrying only plugin metadata (and optionally a tensor). */
function pluginValue(tag: string, plugin: string, content: number[], tensor?: number[]): number[] {
  const pluginData = [...lengthDelimited(1, utf8(plugin)), ...(content.length ? lengthDelimited(2, content) : [])];
  return lengthDelimited(1, [
    ...lengthDelimited(1, utf8(tag)),
    ...(tensor ? lengthDelimited(8, tensor) : []),
    ...lengthDelimited(9, lengthDelimited(1, pluginData)),
  ]);
}

/** google.protobuf.Value for a hyperparameter: numbers, booleans, everything else as a string. */
function protoValue(v: unknown): number[] {
  if (typeof v === 'number' && Number.isFinite(v)) return double(2, v);
  if (typeof v === 'boolean') return [(4 << 3) | 0, v ? 1 : 0];
  return lengthDelimited(3, utf8(typeof v === 'string' ? v : JSON.stringify(v)));
}

function encodeEvent(wallTime: number, step: number, body: number[]): Uint8Array {
  const t = Buffer.alloc(8);
  t.writeDoubleLE(wallTime);
  return Uint8Array.from([0x09, ...t, 0x10, ...varint(Math.max(0, Math.round(step))), ...body]);
}

function scalarValue(tag: string, value: number): number[] {
  const f = Buffer.alloc(4);
  f.writeFloatLE(value);
  return lengthDelimited(1, [...lengthDelimited(1, Buffer.from(tag, 'utf8')), 0x15, ...f]);
}

export function tfRecord(data: Uint8Array): Buffer {
  const head = Buffer.alloc(12);
  head.writeBigUInt64LE(BigInt(data.length));
  head.writeUInt32LE(maskedCrc32c(head.subarray(0, 8)), 8);
  const tail = Buffer.alloc(4);
  tail.writeUInt32LE(maskedCrc32c(data));
  return Buffer.concat([head, data, tail]);
}

/** A metrics sink writing one scalar per metric per logged step. */
export class TensorBoardSink implements MetricsSink {
  readonly file: string;
  private fd: number | null;

  constructor(dir: string) {
    mkdirSync(dir, { recursive: true });
    const now = Date.now() / 1000;
    this.file = join(dir, `events.out.tfevents.${Math.floor(now)}.${hostname()}`);
    this.fd = openSync(this.file, 'a');
    writeSync(this.fd, tfRecord(encodeEvent(now, 0, lengthDelimited(3, Buffer.from('brain.Event:2')))));
  }

  log(step: number, metrics: Record<string, number>): void {
    if (this.fd === null) return;
    const values = Object.entries(metrics).filter(([, v]) => typeof v === 'number' && Number.isFinite(v));
    if (values.length === 0) return;
    const summary = values.flatMap(([tag, v]) => scalarValue(tag, v));
    writeSync(this.fd, tfRecord(encodeEvent(Date.now() / 1000, step, lengthDelimited(5, summary))));
  }

  /** One text entry (shown in TensorBoard's Text tab; Markdown is rendered there). */
  text(step: number, tag: string, text: string): void {
    if (this.fd === null) return;
    const tensor = [0x08, 7, ...lengthDelimited(2, []), ...lengthDelimited(8, utf8(text))];
    const value = pluginValue(tag, 'text', [], tensor);
    writeSync(this.fd, tfRecord(encodeEvent(Date.now() / 1000, step, lengthDelimited(5, value))));
  }

  /**
   * The run's hyperparameters for TensorBoard's HParams tab, with the metric tags it should
   * tabulate against them. Nested objects are flattened to dotted keys; arrays become strings.
   */
  hparams(hparams: Record<string, unknown>, metricTags: readonly string[]): void {
    if (this.fd === null) return;
    const flat = flattenHparams(hparams);
    const experiment = [
      ...Object.keys(flat).flatMap((name) => lengthDelimited(4, lengthDelimited(1, utf8(name)))),
      ...metricTags.flatMap((tag) => lengthDelimited(5, lengthDelimited(1, lengthDelimited(2, utf8(tag))))),
    ];
    const start = [
      ...Object.entries(flat).flatMap(([k, v]) => lengthDelimited(1, [...lengthDelimited(1, utf8(k)), ...lengthDelimited(2, protoValue(v))])),
      ...double(5, Date.now() / 1000),
    ];
    const version = [0x08, 0];
    const now = Date.now() / 1000;
    writeSync(
      this.fd,
      tfRecord(encodeEvent(now, 0, lengthDelimited(5, pluginValue('_hparams_/experiment', 'hparams', [...version, ...lengthDelimited(2, experiment)])))),
    );
    writeSync(
      this.fd,
      tfRecord(encodeEvent(now, 0, lengthDelimited(5, pluginValue('_hparams_/session_start_info', 'hparams', [...version, ...lengthDelimited(3, start)])))),
    );
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }
}

/** {a: {b: 1}, c: [1, 2]} → {"a.b": 1, "c": "[1,2]"}; null values are dropped (HParams has no null). */
export function flattenHparams(obj: Record<string, unknown>, prefix = ''): Record<string, number | string | boolean> {
  const out: Record<string, number | string | boolean> = {};
  for (const [k, v] of Object.entries(obj)) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (v === null || v === undefined) continue;
    if (typeof v === 'object' && !Array.isArray(v)) Object.assign(out, flattenHparams(v as Record<string, unknown>, key));
    else if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'string') out[key] = v;
    else out[key] = JSON.stringify(v);
  }
  return out;
}
