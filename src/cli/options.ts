/** Parsers for CLI options that reject junk with a message naming the flag, and how help names the command. */
import { InvalidArgumentError } from 'commander';

/**
 * The command as help examples and hints write it. `npx magrpo` works in a clone after
 * `npm start`/`npm test` (npm runs a project's own bin) and in any project that installs magrpo,
 * with no global install; after `npm install -g magrpo` plain `magrpo` works too.
 */
export const CLI = 'npx magrpo';

/**
 * Backslash escapes in a command-line string (shells pass `"\n"` as backslash + n): \n, \t,
 * \r and \\ become newline, tab, carriage return and backslash; any other backslash is kept.
 */
export function unescapeArg(value: string): string {
  return value.replace(/\\([\\ntr])/g, (_, c: string) => ({ n: '\n', t: '\t', r: '\r', '\\': '\\' })[c] as string);
}

export function intOption(min: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`expected an integer ≥ ${min}, got "${value}"`);
    return n;
  };
}

/** `--precision`: fp32 or bf16 (the config key `precision`). */
export function precisionOption(value: string): 'fp32' | 'bf16' | 'auto' {
  if (value !== 'fp32' && value !== 'bf16' && value !== 'auto') throw new InvalidArgumentError(`expected fp32, bf16 or auto, got "${value}"`);
  return value;
}

export function floatOption(min: number, max = Number.POSITIVE_INFINITY) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isFinite(n) || n < min || n > max) throw new InvalidArgumentError(`expected a number in [${min}, ${max}], got "${value}"`);
    return n;
  };
}
