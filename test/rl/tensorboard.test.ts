/** TensorBoard event files, read back by an independent Python reader (read_tfevents.py, stdlib only). */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { crc32c, maskedCrc32c, TensorBoardSink } from '../../src/rl/tensorboard.js';

const PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const READER = join(import.meta.dirname, '..', 'cli', 'read_tfevents.py');
const f32 = (x: number) => Math.fround(x);

describe('TensorBoard writer', () => {
  it('CRC-32C matches the standard check value and TFRecord masking', () => {
    assert.equal(crc32c(Buffer.from('123456789')), 0xe3069283);
    assert.equal(crc32c(new Uint8Array(32)), 0x8a9136aa); // RFC 3720 B.4: 32 bytes of zeros
    const c = crc32c(Buffer.from('abc'));
    assert.equal(maskedCrc32c(Buffer.from('abc')), (((c >>> 15) | (c << 17)) + 0xa282ead8) >>> 0);
  });

  it('scalars read back with their steps, tags and float32 values', () => {
    const dir = mkdtempSync(join(tmpdir(), 'magrpo-tb-'));
    const sink = new TensorBoardSink(dir);
    sink.log(4, { 'turn_1/reward_mean': 0.25, 'agent_0/loss': -1.5, 'time/sampling_s': 0.123 });
    sink.log(300, { 'eval/turn_1/reward_mean': 0.7, 'agent_0/lr': 5e-6 });
    sink.log(2 ** 40, { big_step: 1 }); // multi-byte varint
    sink.log(301, { skipped: Number.NaN }); // nothing finite: no event
    sink.close();
    const out = execFileSync(PYTHON, [READER, sink.file], { encoding: 'utf8' });
    const events = out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.equal(events.length, 4);
    assert.equal(events[0].file_version, 'brain.Event:2');
    assert.deepEqual(
      events.slice(1).map((e) => [e.step, e.scalars]),
      [
        [4, { 'turn_1/reward_mean': 0.25, 'agent_0/loss': -1.5, 'time/sampling_s': f32(0.123) }],
        [300, { 'eval/turn_1/reward_mean': f32(0.7), 'agent_0/lr': f32(5e-6) }],
        [2 ** 40, { big_step: 1 }],
      ],
    );
    assert.ok(events.every((e) => Math.abs(e.wall_time - Date.now() / 1000) < 600));
  });

  it('text (sampled completions) and hyperparameters read back through the text and hparams plugins', () => {
    const dir = mkdtempSync(join(tmpdir(), 'magrpo-tb-'));
    const sink = new TensorBoardSink(dir);
    sink.hparams(
      { learning_rate: 1e-5, lora: { r: 8, target_modules: ['q_proj', 'v_proj'] }, fluency_metrics: true, output_dir: null, joint_mode: 'aligned' },
      ['turn_1/reward_mean'],
    );
    sink.text(12, 'eval/samples', 'agent 0:\n\n```\nÜber «quotes» 😀\n```');
    sink.close();
    const events = execFileSync(PYTHON, [READER, sink.file], { encoding: 'utf8' })
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const [experiment, start, text] = events.slice(1);
    assert.deepEqual(experiment.plugins['_hparams_/experiment'].content.experiment, {
      hparams: ['learning_rate', 'lora.r', 'lora.target_modules', 'fluency_metrics', 'joint_mode'],
      metrics: ['turn_1/reward_mean'],
    });
    assert.deepEqual(start.plugins['_hparams_/session_start_info'].content.session_start_info, {
      learning_rate: 1e-5,
      'lora.r': 8,
      'lora.target_modules': '["q_proj","v_proj"]',
      fluency_metrics: true,
      joint_mode: 'aligned',
    });
    assert.equal(text.step, 12);
    assert.deepEqual(text.texts, { 'eval/samples': 'agent 0:\n\n```\nÜber «quotes» 😀\n```' });
    assert.equal(text.scalars, undefined);
  });

  it('the reader rejects a corrupted file (so the CRCs above were really checked)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'magrpo-tb-'));
    const sink = new TensorBoardSink(dir);
    sink.log(1, { x: 1 });
    sink.close();
    const bytes = readFileSync(sink.file);
    bytes[bytes.length - 6] ^= 0xff;
    const bad = join(dir, 'events.out.tfevents.corrupt');
    writeFileSync(bad, bytes);
    const r = spawnSync(PYTHON, [READER, bad], { encoding: 'utf8' });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /bad data crc/);
  });
});
