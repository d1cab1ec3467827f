/** Arithmetic task templates: one integer function each, with randomized constants and names. */
import { makeCases, NUM_NAMES, names, type PyTemplate, plus, pyMod } from './pykit.js';

const int = (name: string) => [name, 'int'] as const;

export const NUMBER_TEMPLATES: PyTemplate[] = [
  {
    id: 'affine',
    kind: 'arith',
    make(rng) {
      const [x] = names(rng, NUM_NAMES, 1);
      const a = rng.int(2, 9);
      const b = rng.int(-20, 20);
      const body = rng.chance(0.5) ? [`return ${plus(`${a} * ${x}`, b)}`] : [`result = ${x} * ${a}`, `result += ${b}`, 'return result'];
      return {
        main: {
          name: rng.pick(['affine', 'scale_and_shift', 'linear_map', 'apply_linear', 'transform']),
          params: [int(x)],
          returns: 'int',
          doc: rng.pick([`Return ${a} times ${x} plus ${b}.`, `Compute ${a} * ${x} + ${b}.`]),
          body,
        },
        cases: makeCases(
          rng,
          () => [rng.int(-15, 30)],
          (v: number) => a * v + b,
        ),
      };
    },
  },
  {
    id: 'is_divisible',
    kind: 'arith',
    make(rng) {
      const [x] = names(rng, NUM_NAMES, 1);
      const k = rng.int(2, 13);
      return {
        main: {
          name: rng.pick([`is_divisible_by_${k}`, `multiple_of_${k}`, `divides_by_${k}`]),
          params: [int(x)],
          returns: 'bool',
          doc: rng.pick([`Return True if ${x} is divisible by ${k}, else False.`, `Check whether ${x} is a multiple of ${k}.`]),
          body: rng.chance(0.5) ? [`return ${x} % ${k} == 0`] : [`if ${x} % ${k} == 0:`, '    return True', 'return False'],
        },
        cases: makeCases(
          rng,
          () => [rng.chance(0.5) ? k * rng.int(0, 12) : rng.int(0, 150)],
          (v: number) => v % k === 0,
        ),
      };
    },
  },
  {
    id: 'clamp',
    kind: 'arith',
    make(rng) {
      const [x] = names(rng, NUM_NAMES, 1);
      const lo = rng.int(-10, 10);
      const hi = lo + rng.int(5, 40);
      const body = rng.chance(0.5)
        ? [`return max(${lo}, min(${hi}, ${x}))`]
        : [`if ${x} < ${lo}:`, `    return ${lo}`, `if ${x} > ${hi}:`, `    return ${hi}`, `return ${x}`];
      return {
        main: {
          name: rng.pick(['clamp', 'clip_value', 'bound', 'limit_range']),
          params: [int(x)],
          returns: 'int',
          doc: `Clamp ${x} to the range [${lo}, ${hi}].`,
          body,
        },
        cases: makeCases(
          rng,
          () => [rng.int(lo - 20, hi + 20)],
          (v: number) => Math.max(lo, Math.min(hi, v)),
        ),
      };
    },
  },
  {
    id: 'digit_sum',
    kind: 'arith',
    make(rng) {
      const [n] = names(rng, NUM_NAMES, 1);
      const body = rng.chance(0.5)
        ? [`return sum(int(c) for c in str(${n}))`]
        : ['total = 0', `while ${n} > 0:`, `    total += ${n} % 10`, `    ${n} //= 10`, 'return total'];
      return {
        main: {
          name: rng.pick(['digit_sum', 'sum_of_digits', 'add_digits']),
          params: [int(n)],
          returns: 'int',
          doc: `Return the sum of the decimal digits of the non-negative integer ${n}.`,
          body,
        },
        cases: makeCases(
          rng,
          () => [rng.int(0, 99999)],
          (v: number) => [...String(v)].reduce((s, c) => s + Number(c), 0),
        ),
      };
    },
  },
  {
    id: 'count_divisors',
    kind: 'arith',
    make(rng) {
      const [n] = names(rng, NUM_NAMES, 1);
      const body = rng.chance(0.5)
        ? [`return sum(1 for d in range(1, ${n} + 1) if ${n} % d == 0)`]
        : ['count = 0', `for d in range(1, ${n} + 1):`, `    if ${n} % d == 0:`, '        count += 1', 'return count'];
      return {
        main: {
          name: rng.pick(['count_divisors', 'num_divisors', 'divisor_count']),
          params: [int(n)],
          returns: 'int',
          doc: `Return how many positive integers divide ${n} evenly.`,
          body,
        },
        cases: makeCases(
          rng,
          () => [rng.int(1, 200)],
          (v: number) => {
            let c = 0;
            for (let d = 1; d <= v; d++) if (v % d === 0) c++;
            return c;
          },
        ),
      };
    },
  },
  {
    id: 'factorial',
    kind: 'arith',
    make(rng) {
      const [n] = names(rng, NUM_NAMES, 1);
      const name = rng.pick(['factorial', 'fact', 'product_up_to']);
      const body = rng.chance(0.5)
        ? ['result = 1', `for i in range(2, ${n} + 1):`, '    result *= i', 'return result']
        : [`if ${n} <= 1:`, '    return 1', `return ${n} * ${name}(${n} - 1)`];
      return {
        main: { name, params: [int(n)], returns: 'int', doc: `Return ${n}! (the product 1 * 2 * ... * ${n}); 0! is 1.`, body },
        cases: makeCases(
          rng,
          () => [rng.int(0, 12)],
          (v: number) => {
            let r = 1;
            for (let i = 2; i <= v; i++) r *= i;
            return r;
          },
        ),
      };
    },
  },
  {
    id: 'fibonacci',
    kind: 'arith',
    make(rng) {
      const [n] = names(rng, NUM_NAMES, 1, ['a']);
      const [f0, f1] = rng.pick([
        [0, 1],
        [1, 1],
        [2, 1],
      ]);
      const label = f0 === 2 ? 'Lucas number' : 'Fibonacci number';
      return {
        main: {
          name: rng.pick(f0 === 2 ? ['lucas', 'nth_lucas'] : ['fib', 'fibonacci', 'nth_fibonacci']),
          params: [int(n)],
          returns: 'int',
          doc: `Return the ${n}-th ${label}, where the sequence starts ${f0}, ${f1}.`,
          body: [`a, b = ${f0}, ${f1}`, `for _ in range(${n}):`, '    a, b = b, a + b', 'return a'],
        },
        cases: makeCases(
          rng,
          () => [rng.int(0, 30)],
          (v: number) => {
            let [a, b] = [f0, f1];
            for (let i = 0; i < v; i++) [a, b] = [b, a + b];
            return a;
          },
        ),
      };
    },
  },
  {
    id: 'gcd',
    kind: 'arith',
    make(rng) {
      const [a, b] = names(rng, ['a', 'b', 'x', 'y', 'm', 'n'], 2);
      return {
        main: {
          name: rng.pick(['gcd', 'greatest_common_divisor', 'common_factor']),
          params: [int(a), int(b)],
          returns: 'int',
          doc: `Return the greatest common divisor of two positive integers ${a} and ${b}.`,
          body: [`while ${b}:`, `    ${a}, ${b} = ${b}, ${a} % ${b}`, `return ${a}`],
        },
        cases: makeCases(
          rng,
          () => {
            const g = rng.int(1, 12);
            return [g * rng.int(1, 20), g * rng.int(1, 20)];
          },
          (x: number, y: number) => {
            while (y) [x, y] = [y, x % y];
            return x;
          },
        ),
      };
    },
  },
  {
    id: 'is_prime',
    kind: 'arith',
    make(rng) {
      const [n] = names(rng, NUM_NAMES, 1);
      return {
        main: {
          name: rng.pick(['is_prime', 'prime', 'check_prime']),
          params: [int(n)],
          returns: 'bool',
          doc: `Return True if ${n} is a prime number, else False.`,
          body: [
            `if ${n} < 2:`,
            '    return False',
            'i = 2',
            `while i * i <= ${n}:`,
            `    if ${n} % i == 0:`,
            '        return False',
            '    i += 1',
            'return True',
          ],
        },
        cases: makeCases(rng, () => [rng.int(0, 200)], isPrime),
      };
    },
  },
  {
    id: 'sum_of_powers',
    kind: 'arith',
    make(rng) {
      const [n] = names(rng, NUM_NAMES, 1);
      const p = rng.int(1, 3);
      const what = ['', 'numbers', 'squares', 'cubes'][p];
      return {
        main: {
          name: rng.pick([`sum_of_${what}`, `${what}_total`]),
          params: [int(n)],
          returns: 'int',
          doc: `Return the sum of the ${what} of 1 through ${n}.`,
          body: rng.chance(0.5)
            ? [`return sum(i ** ${p} for i in range(1, ${n} + 1))`]
            : ['total = 0', `for i in range(1, ${n} + 1):`, `    total += i ** ${p}`, 'return total'],
        },
        cases: makeCases(
          rng,
          () => [rng.int(0, 25)],
          (v: number) => {
            let t = 0;
            for (let i = 1; i <= v; i++) t += i ** p;
            return t;
          },
        ),
      };
    },
  },
  {
    id: 'reverse_digits',
    kind: 'arith',
    make(rng) {
      const [n] = names(rng, NUM_NAMES, 1);
      const body = rng.chance(0.5)
        ? [`return int(str(${n})[::-1])`]
        : ['result = 0', `while ${n} > 0:`, `    result = result * 10 + ${n} % 10`, `    ${n} //= 10`, 'return result'];
      return {
        main: {
          name: rng.pick(['reverse_digits', 'reverse_number', 'flip_digits']),
          params: [int(n)],
          returns: 'int',
          doc: `Return the non-negative integer ${n} with its digits reversed (leading zeros dropped).`,
          body,
        },
        cases: makeCases(
          rng,
          () => [rng.int(0, 99999)],
          (v: number) => Number([...String(v)].reverse().join('')),
        ),
      };
    },
  },
  {
    id: 'collatz_steps',
    kind: 'arith',
    make(rng) {
      const [n] = names(rng, NUM_NAMES, 1);
      return {
        main: {
          name: rng.pick(['collatz_steps', 'steps_to_one', 'hailstone_length']),
          params: [int(n)],
          returns: 'int',
          doc: `Count the Collatz steps from ${n} to 1: halve even numbers, map odd m to 3 * m + 1.`,
          body: [
            'steps = 0',
            `while ${n} != 1:`,
            `    if ${n} % 2 == 0:`,
            `        ${n} //= 2`,
            '    else:',
            `        ${n} = 3 * ${n} + 1`,
            '    steps += 1',
            'return steps',
          ],
        },
        cases: makeCases(
          rng,
          () => [rng.int(1, 60)],
          (v: number) => {
            let s = 0;
            while (v !== 1) {
              v = v % 2 === 0 ? v / 2 : 3 * v + 1;
              s++;
            }
            return s;
          },
        ),
      };
    },
  },
  {
    id: 'sum_multiples',
    kind: 'arith',
    make(rng) {
      const [n] = names(rng, NUM_NAMES, 1);
      const [p, q] = rng.sample([2, 3, 5, 7, 11], 2).sort((u, v) => u - v);
      return {
        main: {
          name: rng.pick(['sum_multiples', `sum_multiples_of_${p}_or_${q}`, 'multiples_total']),
          params: [int(n)],
          returns: 'int',
          doc: `Return the sum of all non-negative integers below ${n} that are multiples of ${p} or ${q}.`,
          body: rng.chance(0.5)
            ? [`return sum(i for i in range(${n}) if i % ${p} == 0 or i % ${q} == 0)`]
            : ['total = 0', `for i in range(${n}):`, `    if i % ${p} == 0 or i % ${q} == 0:`, '        total += i', 'return total'],
        },
        cases: makeCases(
          rng,
          () => [rng.int(0, 100)],
          (v: number) => {
            let t = 0;
            for (let i = 0; i < v; i++) if (i % p === 0 || i % q === 0) t += i;
            return t;
          },
        ),
      };
    },
  },
  {
    id: 'max_of_three',
    kind: 'arith',
    make(rng) {
      const [a, b, c] = rng.pick([
        ['a', 'b', 'c'],
        ['x', 'y', 'z'],
        ['first', 'second', 'third'],
      ]);
      const smallest = rng.chance(0.4);
      const [op, fn, word] = smallest ? ['<', 'min', 'smallest'] : ['>', 'max', 'largest'];
      const body = rng.chance(0.5)
        ? [`return ${fn}(${a}, ${b}, ${c})`]
        : [`best = ${a}`, `if ${b} ${op} best:`, `    best = ${b}`, `if ${c} ${op} best:`, `    best = ${c}`, 'return best'];
      return {
        main: {
          name: rng.pick([`${fn}_of_three`, `${word}_of_three`, `${fn}3`]),
          params: [int(a), int(b), int(c)],
          returns: 'int',
          doc: `Return the ${word} of the three integers ${a}, ${b} and ${c}.`,
          body,
        },
        cases: makeCases(
          rng,
          () => [rng.int(-50, 50), rng.int(-50, 50), rng.int(-50, 50)],
          (x: number, y: number, z: number) => (smallest ? Math.min(x, y, z) : Math.max(x, y, z)),
        ),
      };
    },
  },
  {
    id: 'sign',
    kind: 'arith',
    make(rng) {
      const [x] = names(rng, NUM_NAMES, 1);
      const [neg, zero, pos] = rng.pick([
        ['-1', '0', '1'],
        ["'negative'", "'zero'", "'positive'"],
      ]);
      const value = (s: string): number | string => (s.startsWith("'") ? s.slice(1, -1) : Number(s));
      return {
        main: {
          name: rng.pick(['sign', 'signum', 'classify_sign']),
          params: [int(x)],
          returns: neg === '-1' ? 'int' : 'str',
          doc: `Return ${neg} if ${x} is negative, ${zero} if it is zero and ${pos} if it is positive.`,
          body: [`if ${x} < 0:`, `    return ${neg}`, `if ${x} == 0:`, `    return ${zero}`, `return ${pos}`],
        },
        cases: makeCases(
          rng,
          () => [rng.chance(0.2) ? 0 : rng.int(-100, 100)],
          (v: number) => value(v < 0 ? neg : v === 0 ? zero : pos),
        ),
      };
    },
  },
  {
    id: 'in_range',
    kind: 'arith',
    make(rng) {
      const [x] = names(rng, NUM_NAMES, 1);
      const lo = rng.int(-20, 50);
      const hi = lo + rng.int(3, 60);
      return {
        main: {
          name: rng.pick(['in_range', 'is_between', 'within_bounds']),
          params: [int(x)],
          returns: 'bool',
          doc: `Return True if ${lo} <= ${x} <= ${hi}, otherwise False.`,
          body: rng.chance(0.5) ? [`return ${lo} <= ${x} <= ${hi}`] : [`return ${x} >= ${lo} and ${x} <= ${hi}`],
        },
        cases: makeCases(
          rng,
          () => [rng.int(lo - 15, hi + 15)],
          (v: number) => v >= lo && v <= hi,
        ),
      };
    },
  },
  {
    id: 'round_down',
    kind: 'arith',
    make(rng) {
      const [x] = names(rng, NUM_NAMES, 1);
      const k = rng.pick([2, 3, 4, 5, 8, 10, 12, 25, 100]);
      return {
        main: {
          name: rng.pick([`round_down_to_${k}`, `floor_to_multiple_of_${k}`]),
          params: [int(x)],
          returns: 'int',
          doc: `Round ${x} down to the nearest multiple of ${k}.`,
          body: rng.chance(0.5) ? [`return (${x} // ${k}) * ${k}`] : [`return ${x} - ${x} % ${k}`],
        },
        cases: makeCases(
          rng,
          () => [rng.int(-50, 500)],
          (v: number) => Math.floor(v / k) * k,
        ),
      };
    },
  },
  {
    id: 'triangular',
    kind: 'arith',
    make(rng) {
      const [n] = names(rng, NUM_NAMES, 1);
      return {
        main: {
          name: rng.pick(['triangular', 'triangle_number', 'sum_up_to']),
          params: [int(n)],
          returns: 'int',
          doc: `Return 1 + 2 + ... + ${n} (0 when ${n} is 0).`,
          body: rng.chance(0.5) ? [`return ${n} * (${n} + 1) // 2`] : [`return sum(range(${n} + 1))`],
        },
        cases: makeCases(
          rng,
          () => [rng.int(0, 300)],
          (v: number) => (v * (v + 1)) / 2,
        ),
      };
    },
  },
  {
    id: 'is_perfect_square',
    kind: 'arith',
    make(rng) {
      const [n] = names(rng, NUM_NAMES, 1);
      return {
        main: {
          name: rng.pick(['is_perfect_square', 'is_square', 'perfect_square']),
          params: [int(n)],
          returns: 'bool',
          doc: `Return True if the non-negative integer ${n} is the square of an integer.`,
          body: rng.chance(0.5)
            ? ['r = 0', `while r * r < ${n}:`, '    r += 1', `return r * r == ${n}`]
            : ['import math', '', `return math.isqrt(${n}) ** 2 == ${n}`],
        },
        cases: makeCases(
          rng,
          () => [rng.chance(0.5) ? rng.int(0, 40) ** 2 : rng.int(0, 1600)],
          (v: number) => Number.isInteger(Math.sqrt(v)),
        ),
      };
    },
  },
  {
    id: 'ticket_price',
    kind: 'arith',
    make(rng) {
      const [age] = names(rng, ['age', 'years', 'a'], 1);
      const child = rng.int(8, 14);
      const senior = rng.int(60, 70);
      const [pc, pa, ps] = [rng.int(2, 8), rng.int(9, 20), rng.int(4, 9)];
      return {
        main: {
          name: rng.pick(['ticket_price', 'admission_fee', 'fare_for_age']),
          params: [int(age)],
          returns: 'int',
          doc: `Return the ticket price for a visitor of the given ${age}: ${pc} under ${child}, ${ps} from ${senior} on, ${pa} otherwise.`,
          body: [`if ${age} < ${child}:`, `    return ${pc}`, `if ${age} >= ${senior}:`, `    return ${ps}`, `return ${pa}`],
        },
        cases: makeCases(
          rng,
          () => [rng.int(0, 95)],
          (v: number) => (v < child ? pc : v >= senior ? ps : pa),
        ),
      };
    },
  },
  {
    id: 'mod_power',
    kind: 'arith',
    make(rng) {
      const [b, e] = names(rng, ['base', 'b', 'x'], 1).concat(names(rng, ['exp', 'e', 'k', 'power'], 1));
      const m = rng.pick([7, 10, 13, 97, 100, 1000]);
      return {
        main: {
          name: rng.pick(['power_mod', 'mod_pow', 'last_digits_of_power']),
          params: [int(b), int(e)],
          returns: 'int',
          doc: `Return (${b} ** ${e}) % ${m}, computed without building the full power.`,
          body: ['result = 1', `for _ in range(${e}):`, `    result = result * ${b} % ${m}`, 'return result'],
        },
        cases: makeCases(
          rng,
          () => [rng.int(0, 50), rng.int(0, 20)],
          (x: number, k: number) => {
            let r = 1;
            for (let i = 0; i < k; i++) r = pyMod(r * x, m);
            return r;
          },
        ),
      };
    },
  },
];

export function isPrime(v: number): boolean {
  if (v < 2) return false;
  for (let i = 2; i * i <= v; i++) if (v % i === 0) return false;
  return true;
}
