/**
 * Helper-plus-main templates: a small helper function and a main function that calls it, the shape a
 * two-agent team splits (one writes the helper, the other the main function).
 */

import { intList, LIST_NAMES, makeCases, names, type PyFnSpec, type PyTemplate, STR_NAMES, sentence, WORDS_NAMES, wordList } from './pykit.js';
import { isPrime } from './pytemplates-numbers.js';
import { caesar } from './pytemplates-text.js';
import { tuple } from './pyvalue.js';

const int = (name: string) => [name, 'int'] as const;
const ints = (name: string) => [name, 'list[int]'] as const;
const str = (name: string) => [name, 'str'] as const;

function digitSum(v: number): number {
  return [...String(v)].reduce((s, c) => s + Number(c), 0);
}

function factorial(v: number): number {
  let r = 1;
  for (let i = 2; i <= v; i++) r *= i;
  return r;
}

function primeHelper(name: string, n: string): PyFnSpec {
  return {
    name,
    params: [int(n)],
    returns: 'bool',
    doc: `Return True if ${n} is prime.`,
    body: [`if ${n} < 2:`, '    return False', `for d in range(2, int(${n} ** 0.5) + 1):`, `    if ${n} % d == 0:`, '        return False', 'return True'],
  };
}

export const COMPOSE_TEMPLATES: PyTemplate[] = [
  {
    id: 'count_primes',
    kind: 'compose',
    make(rng) {
      const helper = primeHelper(rng.pick(['is_prime', 'prime', 'check_prime']), rng.pick(['n', 'x', 'k']));
      const [xs] = names(rng, LIST_NAMES, 1);
      const sum = rng.chance(0.5);
      return {
        helper,
        main: {
          name: rng.pick(sum ? ['sum_primes', 'prime_total'] : ['count_primes', 'num_primes']),
          params: [ints(xs)],
          returns: 'int',
          doc: `Return the ${sum ? 'sum' : 'number'} of the prime elements of ${xs}.`,
          body: sum ? [`return sum(v for v in ${xs} if ${helper.name}(v))`] : [`return len([v for v in ${xs} if ${helper.name}(v)])`],
        },
        cases: makeCases(
          rng,
          () => [intList(rng, 0, 7, 0, 60)],
          (v: number[]) => (sum ? v.filter(isPrime).reduce((a, b) => a + b, 0) : v.filter(isPrime).length),
        ),
      };
    },
  },
  {
    id: 'primes_below',
    kind: 'compose',
    make(rng) {
      const helper = primeHelper(rng.pick(['is_prime', 'prime']), rng.pick(['n', 'x', 'k']));
      const [n] = names(rng, ['limit', 'n', 'upper', 'bound'], 1);
      return {
        helper,
        main: {
          name: rng.pick(['primes_below', 'list_primes', 'primes_under']),
          params: [int(n)],
          returns: 'list[int]',
          doc: `Return the primes smaller than ${n}, in increasing order.`,
          body: [`return [v for v in range(2, ${n}) if ${helper.name}(v)]`],
        },
        cases: makeCases(
          rng,
          () => [rng.int(0, 40)],
          (v: number) => Array.from({ length: Math.max(0, v) }, (_, i) => i).filter(isPrime),
        ),
      };
    },
  },
  {
    id: 'digit_sum_filter',
    kind: 'compose',
    make(rng) {
      const hname = rng.pick(['digit_sum', 'sum_digits']);
      const helper: PyFnSpec = {
        name: hname,
        params: [int('n')],
        returns: 'int',
        doc: 'Return the sum of the decimal digits of the non-negative integer n.',
        body: ['return sum(int(c) for c in str(n))'],
      };
      const [xs] = names(rng, LIST_NAMES, 1);
      const mode = rng.pick(['even', 'sort', 'max'] as const);
      const main: PyFnSpec =
        mode === 'even'
          ? {
              name: 'even_digit_sums',
              params: [ints(xs)],
              returns: 'list[int]',
              doc: `Return the elements of ${xs} whose digit sum is even.`,
              body: [`return [v for v in ${xs} if ${hname}(v) % 2 == 0]`],
            }
          : mode === 'sort'
            ? {
                name: 'sort_by_digit_sum',
                params: [ints(xs)],
                returns: 'list[int]',
                doc: `Return ${xs} sorted by digit sum (stable for ties).`,
                body: [`return sorted(${xs}, key=${hname})`],
              }
            : {
                name: 'max_digit_sum',
                params: [ints(xs)],
                returns: 'int',
                doc: `Return the largest digit sum among the elements of the non-empty list ${xs}.`,
                body: [`return max(${hname}(v) for v in ${xs})`],
              };
      return {
        helper,
        main,
        cases: makeCases(
          rng,
          () => [intList(rng, mode === 'max' ? 1 : 0, 6, 0, 999)],
          (v: number[]) =>
            mode === 'even'
              ? v.filter((x) => digitSum(x) % 2 === 0)
              : mode === 'sort'
                ? [...v].sort((a, b) => digitSum(a) - digitSum(b))
                : Math.max(...v.map(digitSum)),
        ),
      };
    },
  },
  {
    id: 'reverse_each_word',
    kind: 'compose',
    make(rng) {
      const hname = rng.pick(['reverse_word', 'flip', 'backwards']);
      const [s] = names(rng, STR_NAMES, 1);
      return {
        helper: { name: hname, params: [str('w')], returns: 'str', doc: 'Return the string w reversed.', body: ['return w[::-1]'] },
        main: {
          name: rng.pick(['reverse_each_word', 'mirror_words', 'flip_words']),
          params: [str(s)],
          returns: 'str',
          doc: `Reverse every word of ${s} but keep the words in their order; words are separated by single spaces.`,
          body: [`return ' '.join(${hname}(w) for w in ${s}.split(' '))`],
        },
        cases: makeCases(
          rng,
          () => [sentence(rng, 1, 4)],
          (v: string) =>
            v
              .split(' ')
              .map((w) => [...w].reverse().join(''))
              .join(' '),
        ),
      };
    },
  },
  {
    id: 'sum_of_squares',
    kind: 'compose',
    make(rng) {
      const hname = rng.pick(['square', 'sq', 'squared']);
      const [xs] = names(rng, LIST_NAMES, 1);
      const evensOnly = rng.chance(0.4);
      return {
        helper: { name: hname, params: [int('x')], returns: 'int', doc: 'Return x multiplied by itself.', body: ['return x * x'] },
        main: {
          name: evensOnly ? 'sum_even_squares' : rng.pick(['sum_of_squares', 'square_sum']),
          params: [ints(xs)],
          returns: 'int',
          doc: `Return the sum of the squares of the ${evensOnly ? 'even ' : ''}elements of ${xs}.`,
          body: evensOnly
            ? [`return sum(${hname}(v) for v in ${xs} if v % 2 == 0)`]
            : ['total = 0', `for v in ${xs}:`, `    total += ${hname}(v)`, 'return total'],
        },
        cases: makeCases(
          rng,
          () => [intList(rng, 0, 6, -9, 12)],
          (v: number[]) => v.filter((x) => !evensOnly || x % 2 === 0).reduce((s, x) => s + x * x, 0),
        ),
      };
    },
  },
  {
    id: 'clamp_all',
    kind: 'compose',
    make(rng) {
      const lo = rng.int(-5, 5);
      const hi = lo + rng.int(3, 15);
      const hname = rng.pick(['clamp', 'clip', 'bound']);
      const [xs] = names(rng, LIST_NAMES, 1);
      return {
        helper: { name: hname, params: [int('v')], returns: 'int', doc: `Clamp v to the range [${lo}, ${hi}].`, body: [`return max(${lo}, min(${hi}, v))`] },
        main: {
          name: rng.pick(['clamp_all', 'clip_all', 'bound_all']),
          params: [ints(xs)],
          returns: 'list[int]',
          doc: `Return a list with every element of ${xs} clamped to [${lo}, ${hi}].`,
          body: [`return [${hname}(v) for v in ${xs}]`],
        },
        cases: makeCases(
          rng,
          () => [intList(rng, 0, 6, lo - 10, hi + 10)],
          (v: number[]) => v.map((x) => Math.max(lo, Math.min(hi, x))),
        ),
      };
    },
  },
  {
    id: 'lcm',
    kind: 'compose',
    make(rng) {
      const hname = rng.pick(['gcd', 'greatest_common_divisor']);
      const listMode = rng.chance(0.4);
      const gcd = (x: number, y: number): number => (y === 0 ? x : gcd(y, x % y));
      const helper: PyFnSpec = {
        name: hname,
        params: [int('a'), int('b')],
        returns: 'int',
        doc: 'Return the greatest common divisor of a and b.',
        body: ['while b:', '    a, b = b, a % b', 'return a'],
      };
      if (listMode) {
        const [xs] = names(rng, LIST_NAMES, 1);
        return {
          helper,
          main: {
            name: rng.pick(['gcd_of_list', 'common_divisor_all']),
            params: [ints(xs)],
            returns: 'int',
            doc: `Return the greatest common divisor of all elements of the non-empty list ${xs} of positive integers.`,
            body: [`result = ${xs}[0]`, `for v in ${xs}[1:]:`, `    result = ${hname}(result, v)`, 'return result'],
          },
          cases: makeCases(
            rng,
            () => {
              const g = rng.int(1, 9);
              return [intList(rng, 1, 5, 1, 12).map((v) => v * g)];
            },
            (v: number[]) => v.reduce(gcd),
          ),
        };
      }
      return {
        helper,
        main: {
          name: rng.pick(['lcm', 'least_common_multiple']),
          params: [int('x'), int('y')],
          returns: 'int',
          doc: 'Return the least common multiple of the positive integers x and y.',
          body: [`return x * y // ${hname}(x, y)`],
        },
        cases: makeCases(
          rng,
          () => [rng.int(1, 30), rng.int(1, 30)],
          (x: number, y: number) => (x * y) / gcd(x, y),
        ),
      };
    },
  },
  {
    id: 'count_palindromes',
    kind: 'compose',
    make(rng) {
      const hname = rng.pick(['is_palindrome', 'palindrome', 'is_mirror']);
      const [ws] = names(rng, WORDS_NAMES, 1);
      const asList = rng.chance(0.5);
      const isPal = (w: string) => w === [...w].reverse().join('');
      return {
        helper: { name: hname, params: [str('w')], returns: 'bool', doc: 'Return True if w reads the same backwards.', body: ['return w == w[::-1]'] },
        main: {
          name: asList ? rng.pick(['palindromes', 'keep_palindromes']) : rng.pick(['count_palindromes', 'num_palindromes']),
          params: [[ws, 'list[str]']],
          returns: asList ? 'list[str]' : 'int',
          doc: asList ? `Return the palindromes in ${ws}, in order.` : `Return how many strings in ${ws} are palindromes.`,
          body: asList ? [`return [w for w in ${ws} if ${hname}(w)]`] : [`return sum(1 for w in ${ws} if ${hname}(w))`],
        },
        cases: makeCases(
          rng,
          () => [wordList(rng, 0, 5)],
          (v: string[]) => (asList ? v.filter(isPal) : v.filter(isPal).length),
        ),
      };
    },
  },
  {
    id: 'unique_words',
    kind: 'compose',
    make(rng) {
      const hname = rng.pick(['normalize', 'clean_word', 'canonical']);
      const [s] = names(rng, STR_NAMES, 1);
      const norm = (w: string) => w.toLowerCase().replace(/^[.,!?]+|[.,!?]+$/g, '');
      return {
        helper: {
          name: hname,
          params: [str('w')],
          returns: 'str',
          doc: 'Lower-case w and strip the punctuation .,!? from both ends.',
          body: ["return w.lower().strip('.,!?')"],
        },
        main: {
          name: rng.pick(['count_unique_words', 'distinct_words', 'vocabulary_size']),
          params: [str(s)],
          returns: 'int',
          doc: `Return how many different words ${s} contains, ignoring case and surrounding punctuation.`,
          body: [`return len({${hname}(w) for w in ${s}.split()})`],
        },
        cases: makeCases(
          rng,
          () => [
            Array.from({ length: rng.int(1, 6) }, () => {
              const w = rng.pick(['the', 'cat', 'dog', 'sun', 'moon']);
              return (rng.chance(0.3) ? w.toUpperCase() : w) + (rng.chance(0.3) ? rng.pick(['.', ',', '!', '?']) : '');
            }).join(' '),
          ],
          (v: string) => new Set(v.split(' ').map(norm)).size,
        ),
      };
    },
  },
  {
    id: 'choose',
    kind: 'compose',
    make(rng) {
      const hname = rng.pick(['factorial', 'fact']);
      return {
        helper: {
          name: hname,
          params: [int('n')],
          returns: 'int',
          doc: 'Return n! for n >= 0.',
          body: ['result = 1', 'for i in range(2, n + 1):', '    result *= i', 'return result'],
        },
        main: {
          name: rng.pick(['choose', 'binomial', 'combinations_count']),
          params: [int('n'), int('k')],
          returns: 'int',
          doc: 'Return the number of ways to choose k items from n (0 <= k <= n).',
          body: [`return ${hname}(n) // (${hname}(k) * ${hname}(n - k))`],
        },
        cases: makeCases(
          rng,
          () => {
            const n = rng.int(0, 12);
            return [n, rng.int(0, n)];
          },
          (n: number, k: number) => factorial(n) / (factorial(k) * factorial(n - k)),
        ),
      };
    },
  },
  {
    id: 'above_mean',
    kind: 'compose',
    make(rng) {
      const hname = rng.pick(['mean_floor', 'average', 'int_mean']);
      const [xs] = names(rng, LIST_NAMES, 1);
      const below = rng.chance(0.4);
      return {
        helper: {
          name: hname,
          params: [ints('values')],
          returns: 'int',
          doc: 'Return the mean of the non-empty list values, rounded down.',
          body: ['return sum(values) // len(values)'],
        },
        main: {
          name: below ? 'below_mean' : rng.pick(['above_mean', 'above_average']),
          params: [ints(xs)],
          returns: 'list[int]',
          doc: `Return the elements of the non-empty list ${xs} strictly ${below ? 'below' : 'above'} its rounded-down mean.`,
          body: [`m = ${hname}(${xs})`, `return [v for v in ${xs} if v ${below ? '<' : '>'} m]`],
        },
        cases: makeCases(
          rng,
          () => [intList(rng, 1, 7, 0, 30)],
          (v: number[]) => {
            const m = Math.floor(v.reduce((a, b) => a + b, 0) / v.length);
            return v.filter((x) => (below ? x < m : x > m));
          },
        ),
      };
    },
  },
  {
    id: 'caesar_compose',
    kind: 'compose',
    make(rng) {
      const k = rng.int(1, 25);
      const hname = rng.pick(['shift_char', 'rotate_char', 'shift_letter']);
      const [s] = names(rng, STR_NAMES, 1);
      return {
        helper: {
          name: hname,
          params: [str('ch')],
          returns: 'str',
          doc: `Shift the lowercase letter ch forward by ${k} places (wrapping around); return other characters unchanged.`,
          body: ["if not 'a' <= ch <= 'z':", '    return ch', `return chr((ord(ch) - 97 + ${k}) % 26 + 97)`],
        },
        main: {
          name: rng.pick(['encode', 'encrypt', 'caesar']),
          params: [str(s)],
          returns: 'str',
          doc: `Encode ${s} by shifting each character with ${hname}.`,
          body: [`return ''.join(${hname}(ch) for ch in ${s})`],
        },
        cases: makeCases(
          rng,
          () => [sentence(rng, 1, 3)],
          (v: string) => caesar(v, k),
        ),
      };
    },
  },
  {
    id: 'best_word',
    kind: 'compose',
    make(rng) {
      const hname = rng.pick(['word_score', 'letter_value', 'score']);
      const [ws] = names(rng, WORDS_NAMES, 1);
      const score = (w: string) => [...w].reduce((s, c) => s + c.charCodeAt(0) - 96, 0);
      return {
        helper: {
          name: hname,
          params: [str('w')],
          returns: 'int',
          doc: "Return the sum of the letter positions of the lowercase word w ('a' = 1, 'b' = 2, ...).",
          body: ['return sum(ord(c) - 96 for c in w)'],
        },
        main: {
          name: rng.pick(['best_word', 'highest_scoring', 'top_word']),
          params: [[ws, 'list[str]']],
          returns: 'str',
          doc: `Return the word in the non-empty list ${ws} with the highest score; the first one wins ties.`,
          body: [`best = ${ws}[0]`, `for w in ${ws}[1:]:`, `    if ${hname}(w) > ${hname}(best):`, '        best = w', 'return best'],
        },
        cases: makeCases(
          rng,
          () => [wordList(rng, 1, 5)],
          (v: string[]) => v.reduce((best, w) => (score(w) > score(best) ? w : best)),
        ),
      };
    },
  },
  {
    id: 'fib_list',
    kind: 'compose',
    make(rng) {
      const hname = rng.pick(['fib', 'fibonacci']);
      const evenSum = rng.chance(0.4);
      const fib = (n: number) => {
        let [a, b] = [0, 1];
        for (let i = 0; i < n; i++) [a, b] = [b, a + b];
        return a;
      };
      return {
        helper: {
          name: hname,
          params: [int('n')],
          returns: 'int',
          doc: 'Return the n-th Fibonacci number (fib(0) = 0, fib(1) = 1).',
          body: ['a, b = 0, 1', 'for _ in range(n):', '    a, b = b, a + b', 'return a'],
        },
        main: evenSum
          ? {
              name: 'sum_even_fibs',
              params: [int('count')],
              returns: 'int',
              doc: 'Return the sum of the even numbers among the first count Fibonacci numbers.',
              body: [`return sum(${hname}(i) for i in range(count) if ${hname}(i) % 2 == 0)`],
            }
          : {
              name: rng.pick(['fib_list', 'first_fibs']),
              params: [int('count')],
              returns: 'list[int]',
              doc: 'Return the first count Fibonacci numbers.',
              body: [`return [${hname}(i) for i in range(count)]`],
            },
        cases: makeCases(
          rng,
          () => [rng.int(0, 15)],
          (n: number) => {
            const list = Array.from({ length: n }, (_, i) => fib(i));
            return evenSum ? list.filter((v) => v % 2 === 0).reduce((a, b) => a + b, 0) : list;
          },
        ),
      };
    },
  },
  {
    id: 'split_parity',
    kind: 'compose',
    make(rng) {
      const hname = rng.pick(['is_even', 'even']);
      const [xs] = names(rng, LIST_NAMES, 1);
      return {
        helper: { name: hname, params: [int('v')], returns: 'bool', doc: 'Return True if v is even.', body: ['return v % 2 == 0'] },
        main: {
          name: rng.pick(['split_parity', 'partition_even_odd', 'evens_and_odds']),
          params: [ints(xs)],
          returns: 'tuple[list[int], list[int]]',
          doc: `Return a tuple (evens, odds) of the even and the odd elements of ${xs}, each in input order.`,
          body: [
            'evens = []',
            'odds = []',
            `for v in ${xs}:`,
            `    if ${hname}(v):`,
            '        evens.append(v)',
            '    else:',
            '        odds.append(v)',
            'return evens, odds',
          ],
        },
        cases: makeCases(
          rng,
          () => [intList(rng, 0, 6, 0, 20)],
          (v: number[]) =>
            tuple(
              v.filter((x) => x % 2 === 0),
              v.filter((x) => x % 2 !== 0),
            ),
        ),
      };
    },
  },
  {
    id: 'convert_temperatures',
    kind: 'compose',
    make(rng) {
      const hname = rng.pick(['to_fahrenheit', 'c_to_f', 'celsius_to_fahrenheit']);
      const [xs] = names(rng, ['temps', 'celsius', 'readings'], 1);
      const warmest = rng.chance(0.4);
      const f = (c: number) => Math.floor((c * 9) / 5) + 32;
      return {
        helper: {
          name: hname,
          params: [int('c')],
          returns: 'int',
          doc: 'Convert whole degrees Celsius to Fahrenheit, rounding down.',
          body: ['return c * 9 // 5 + 32'],
        },
        main: warmest
          ? {
              name: 'warmest_fahrenheit',
              params: [ints(xs)],
              returns: 'int',
              doc: `Return the highest of the non-empty list ${xs} of Celsius readings, in Fahrenheit.`,
              body: [`return ${hname}(max(${xs}))`],
            }
          : {
              name: rng.pick(['convert_all', 'to_fahrenheit_list']),
              params: [ints(xs)],
              returns: 'list[int]',
              doc: `Convert every Celsius reading in ${xs} to Fahrenheit.`,
              body: [`return [${hname}(c) for c in ${xs}]`],
            },
        cases: makeCases(
          rng,
          () => [intList(rng, warmest ? 1 : 0, 5, -30, 40)],
          (v: number[]) => (warmest ? f(Math.max(...v)) : v.map(f)),
        ),
      };
    },
  },
  {
    id: 'discount_total',
    kind: 'compose',
    make(rng) {
      const pct = rng.pick([5, 10, 15, 20, 25, 30, 50]);
      const hname = rng.pick(['discounted', 'apply_discount', 'sale_price']);
      const [xs] = names(rng, ['prices', 'costs', 'amounts'], 1);
      const d = (p: number) => p - Math.floor((p * pct) / 100);
      return {
        helper: {
          name: hname,
          params: [int('price')],
          returns: 'int',
          doc: `Return price minus ${pct} percent of it (the discount is rounded down).`,
          body: [`return price - price * ${pct} // 100`],
        },
        main: {
          name: rng.pick(['total_after_discount', 'sale_total', 'checkout_total']),
          params: [ints(xs)],
          returns: 'int',
          doc: `Return the total of ${xs} after discounting each price.`,
          body: [`return sum(${hname}(p) for p in ${xs})`],
        },
        cases: makeCases(
          rng,
          () => [intList(rng, 0, 5, 1, 200)],
          (v: number[]) => v.reduce((s, p) => s + d(p), 0),
        ),
      };
    },
  },
  {
    id: 'leap_years',
    kind: 'compose',
    make(rng) {
      const hname = rng.pick(['is_leap', 'leap_year', 'is_leap_year']);
      const leap = (y: number) => (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
      return {
        helper: {
          name: hname,
          params: [int('year')],
          returns: 'bool',
          doc: 'Return True if year is a Gregorian leap year.',
          body: ['return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)'],
        },
        main: {
          name: rng.pick(['count_leap_years', 'leap_years_between']),
          params: [int('start'), int('end')],
          returns: 'int',
          doc: 'Return how many leap years there are from start to end, both included.',
          body: [`return sum(1 for y in range(start, end + 1) if ${hname}(y))`],
        },
        cases: makeCases(
          rng,
          () => {
            const a = rng.int(1800, 2100);
            return [a, a + rng.int(0, 120)];
          },
          (a: number, b: number) => {
            let c = 0;
            for (let y = a; y <= b; y++) if (leap(y)) c++;
            return c;
          },
        ),
      };
    },
  },
  {
    id: 'armstrong',
    kind: 'compose',
    make(rng) {
      const hname = rng.pick(['digits', 'digit_list', 'to_digits']);
      const narc = (n: number) => {
        const ds = [...String(n)].map(Number);
        return ds.reduce((s, d) => s + d ** ds.length, 0) === n;
      };
      return {
        helper: {
          name: hname,
          params: [int('n')],
          returns: 'list[int]',
          doc: 'Return the decimal digits of the non-negative integer n, most significant first.',
          body: ['return [int(c) for c in str(n)]'],
        },
        main: {
          name: rng.pick(['is_armstrong', 'is_narcissistic']),
          params: [int('n')],
          returns: 'bool',
          doc: 'Return True if n equals the sum of its digits each raised to the number of digits.',
          body: [`ds = ${hname}(n)`, 'return sum(d ** len(ds) for d in ds) == n'],
        },
        cases: makeCases(rng, () => [rng.chance(0.4) ? rng.pick([0, 1, 7, 153, 370, 371, 407, 1634, 8208]) : rng.int(0, 9999)], narc),
      };
    },
  },
  {
    id: 'longest_word_length',
    kind: 'compose',
    make(rng) {
      const hname = rng.pick(['word_lengths', 'lengths']);
      const [s] = names(rng, STR_NAMES, 1);
      return {
        helper: {
          name: hname,
          params: [str('text')],
          returns: 'list[int]',
          doc: 'Return the lengths of the space-separated words in text.',
          body: ['return [len(w) for w in text.split()]'],
        },
        main: {
          name: rng.pick(['longest_word_length', 'max_word_length']),
          params: [str(s)],
          returns: 'int',
          doc: `Return the length of the longest word in ${s}, or 0 if there are no words.`,
          body: [`return max(${hname}(${s}), default=0)`],
        },
        cases: makeCases(
          rng,
          () => [sentence(rng, 0, 5)],
          (v: string) => Math.max(0, ...v.split(' ').map((w) => w.length)),
        ),
      };
    },
  },
];
