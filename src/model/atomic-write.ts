/** Crash-safe file writes: checkpoints and model folders never hold a half-written file. */
import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';

/** writeSync takes an int32 length, so big buffers move in chunks. */
const IO_CHUNK = 1 << 30;

/**
 * Writes `chunks` to `file.tmp-<pid>`, fsyncs, then renames over `file`, so readers see either the
 * old file or the complete new one. A throw from `chunks` (a generator may validate as it goes)
 * removes the temp file and leaves `file` as it was.
 */
export function writeFileAtomic(file: string, chunks: Iterable<Uint8Array | string>): void {
  const tmp = `${file}.tmp-${process.pid}`;
  let fd: number | undefined = openSync(tmp, 'w');
  try {
    for (const chunk of chunks) writeAll(fd, typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk);
    fsyncSync(fd);
    closeSync(fd);
    fd = undefined;
    renameSync(tmp, file);
  } catch (err) {
    if (fd !== undefined) closeSync(fd);
    rmSync(tmp, { force: true });
    throw err;
  }
}

function writeAll(fd: number, bytes: Uint8Array): void {
  for (let done = 0; done < bytes.length; ) {
    done += writeSync(fd, bytes, done, Math.min(bytes.length - done, IO_CHUNK));
  }
}
