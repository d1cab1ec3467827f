/** Parsers for numeric CLI options that reject junk with a message naming the flag. */
import { InvalidArgumentError } from 'commander';

export function intOption(min: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`expected an integer ≥ ${min}, got "${value}"`);
    return n;
  };
}

export function floatOption(min: number, max = Number.POSITIVE_INFINITY) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isFinite(n) || n < min || n > max) throw new InvalidArgumentError(`expected a number in [${min}, ${max}], got "${value}"`);
    return n;
  };
}
