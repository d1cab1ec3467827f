/**
 * TensorBoard scalars without TensorFlow: an `events.out.tfevents.*` file is a TFRecord stream of
 * `tensorflow.Event` protobufs. The npm options bundle TensorFlow's native library, so the two
 * formats are written here (about 60 lines, read back by an independent Python reader in tests).
 *
 *   record = u64 length | u32 masked_crc32c(length bytes) | data | u32 masked_crc32c(data)
 *   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
 *   Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
 */
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { MetricsSink } from '../rl/metrics.js';

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

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }
}
