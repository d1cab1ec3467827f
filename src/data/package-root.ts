/**
 * Where the package's shipped files (data/, models/, configs/, native/) live: the nearest folder at
 * or above this module that holds package.json. The same from src/ (tsx) and dist/src/ (built).
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The package root; the filesystem root when no package.json is above this module. */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json')) && dirname(dir) !== dir) dir = dirname(dir);
  return dir;
}
