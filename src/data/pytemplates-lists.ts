/** List task templates. */
import { intList, LIST_NAMES, makeCases, names, type PyTemplate } from './pykit.js';
import type { PyValue } from './pyvalue.js';

const ints = (name: string) => [name, 'list[int]'] as const;

export const LIST_TEMPLATES: PyTemplate[] = [
  {
    id: 'sum_above',
    kind: 'list',
    make(rng) {
      const [xs] = names(rng, LIST_NAMES, 1);
      const t = rng.int(-5, 20);
      return {
        main: {
          name: rng.pick([t >= 0 ? `sum_above_${t}` : 'sum_above_threshold', 'sum_above_threshold', 'sum_large']),
          params: [ints(xs)],
          returns: 'int',
          doc: `Return the sum of the elements of ${xs} that are greater than ${t}.`,
          body: rng.chance(0.5)
            ? [`return sum(v for v in ${xs} if v > ${t})`]
            : ['total = 0', `for v in ${xs}:`, `    if v > ${t}:`, '        total += v', 'return total'],
        },
        cases: makeCases(
          rng,
          () => [intList(rng, 0, 7, -10, 40)],
          (v: number[]) => v.filter((x) => x > t).reduce((a, b) => a + b, 0),
        ),
      };
    },
  },
  {
    id: 'filter_multiples',
    kind: 'list',
    make(rng) {
      const [xs] = names(rng, LIST_NAMES, 1);
      const k = rng.int(2, 7);
      const keep = rng.chance(0.7);
      const cond = keep ? '==' : '!=';
      return {
        main: {
          name: rng.pick(keep ? [`multiples_of_${k}`, `keep_multiples_of_${k}`] : [`drop_multiples_of_${k}`, `remove_multiples_of_${k}`]),
          params: [ints(xs)],
          returns: 'list[int]',
          doc: `Return the elements of ${xs} that are ${keep ? '' : 'not '}divisible by ${k}, in their original order.`,
          body: rng.chance(0.5)
            ? [`return [v for v in ${xs} if v % ${k} ${cond} 0]`]
            : ['result = []', `for v in ${xs}:`, `    if v % ${k} ${cond} 0:`, '        result.append(v)', 'return result'],
        },
        cases: makeCases(
          rng,
          () => [intList(rng, 0, 8, 0, 50)],
          (v: number[]) => v.filter((x) => (x % k === 0) === keep),
        ),
      };
    },
  },
  {
    id: 'scale_list',
    kind: 'list',
    make(rng) {
      const [xs] = names(rng, LIST_NAMES, 1);
      const k = rng.int(-3, 9) || 2;
      const c = rng.int(-5, 5);
      const expr = c === 0 ? `v * ${k}` : c > 0 ? `v * ${k} + ${c}` : `v * ${k} - ${-c}`;
      return {
        main: {
          name: rng.pick(['scale_all', 'transform_all', 'map_values', 'apply_to_each']),
          params: [ints(xs)],
          returns: 'list[int]',
          doc: `Return a new list where each element v of ${xs} becomes ${expr}.`,
          body: rng.chance(0.5) ? [`return [${expr} for v in ${xs}]`] : ['out = []', `for v in ${xs}:`, `    out.append(${expr})`, 'return out'],
        },
        cases: makeCases(
          rng,
          () => [intList(rng, 0, 6, -10, 10)],
          (v: number[]) => v.map((x) => x * k + c),
        ),
      };
    },
  },
  {
    id: 'prefix_sums',
    kind: 'list',
    make(rng) {
      const [xs] = names(rng, LIST_NAMES, 1);
      return {
        main: {
          name: rng.pick(['prefix_sums', 'running_total', 'cumulative_sum']),
          params: [ints(xs)],
          returns: 'list[int]',
          doc: `Return the running totals of ${xs}: element i is the sum of the first i + 1 elements.`,
          body: ['total = 0', 'out = []', `for v in ${xs}:`, '    total += v', '    out.append(total)', 'return out'],
        },
        cases: makeCases(
          rng,
          () => [intList(rng, 0, 7, -5, 20)],
          (v: number[]) => {
            let t = 0;
            return v.map((x) => (t += x));
          },
        ),
      };
    },
  },
  {
    id: 'spread',
    kind: 'list',
    make(rng) {
      const [xs] = names(rng, LIST_NAMES, 1);
      return {
        main: {
          name: rng.pick(['spread', 'value_range', 'max_minus_min']),
          params: [ints(xs)],
          returns: 'int',
          doc: `Return the largest element of the non-empty list ${xs} minus the smallest.`,
          body: rng.chance(0.5)
            ? [`return max(${xs}) - min(${xs})`]
            : [`lo = hi = ${xs}[0]`, `for v in ${xs}:`, '    if v < lo:', '        lo = v', '    if v > hi:', '        hi = v', 'return hi - lo'],
        },
        cases: makeCases(
          rng,
          () => [intList(rng, 1, 7, -30, 30)],
          (v: number[]) => Math.max(...v) - Math.min(...v),
        ),
      };
    },
  },
  {
    id: 'count_occurrences',
    kind: 'list',
    make(rng) {
      const [xs, t] = [names(rng, LIST_NAMES, 1)[0], rng.pick(['target', 'value', 'x', 'item'])];
      return {
        main: {
          name: rng.pick(['count_occurrences', 'count_of', 'frequency']),
          params: [ints(xs), [t, 'int']],
          returns: 'int',
          doc: `Return how many elements of ${xs} are equal to ${t}.`,
          body: rng.chance(0.5) ? [`return ${xs}.count(${t})`] : ['n = 0', `for v in ${xs}:`, `    if v == ${t}:`, '        n += 1', 'return n'],
        },
        cases: makeCases(
          rng,
          () => [intList(rng, 0, 8, 0, 4), rng.int(0, 4)],
          (v: number[], x: number) => v.filter((y) => y === x).length,
        ),
      };
    },
  },
  {
    id: 'second_largest',
    kind: 'list',
    make(rng) {
      const [xs] = names(rng, LIST_NAMES, 1);
      return {
        main: {
          name: rng.pick(['second_largest', 'runner_up', 'second_max']),
          params: [ints(xs)],
          returns: 'int',
          doc: `Return the second largest distinct value in ${xs} (which has at least two distinct values).`,
          body: rng.chance(0.5) ? [`return sorted(set(${xs}))[-2]`] : [`top = max(${xs})`, `return max(v for v in ${xs} if v != top)`],
        },
        cases: makeCases(
          rng,
          () => {
            const v = intList(rng, 2, 7, -20, 20);
            return new Set(v).size > 1 ? [v] : [[...v, v[0] + 1]];
          },
          (v: number[]) => [...new Set(v)].sort((a, b) => a - b).at(-2) as number,
        ),
      };
    },
  },
  {
    id: 'unique_in_order',
    kind: 'list',
    make(rng) {
      const [xs] = names(rng, LIST_NAMES, 1);
      return {
        main: {
          name: rng.pick(['unique_in_order', 'dedupe', 'remove_duplicates']),
          params: [ints(xs)],
          returns: 'list[int]',
          doc: `Return ${xs} without repeated values, keeping the first occurrence of each.`,
          body: ['seen = set()', 'out = []', `for v in ${xs}:`, '    if v not in seen:', '        seen.add(v)', '        out.append(v)', 'return out'],
        },
        cases: makeCases(
          rng,
          () => [intList(rng, 0, 9, 0, 5)],
          (v: number[]) => [...new Set(v)],
        ),
      };
    },
  },
  {
    id: 'differences',
    kind: 'list',
    make(rng) {
      const [xs] = names(rng, LIST_NAMES, 1);
      return {
        main: {
          name: rng.pick(['differences', 'deltas', 'consecutive_gaps']),
          params: [ints(xs)],
          returns: 'list[int]',
          doc: `Return the differences between consecutive elements of ${xs} (later minus earlier).`,
          body: rng.chance(0.5) ? [`return [b - a for a, b in zip(${xs}, ${xs}[1:])]`] : [`return [${xs}[i + 1] - ${xs}[i] for i in range(len(${xs}) - 1)]`],
        },
        cases: makeCases(
          rng,
          () => [intList(rng, 0, 7, -10, 30)],
          (v: number[]) => v.slice(1).map((b, i) => b - v[i]),
        ),
      };
    },
  },
  {
    id: 'rotate_left',
    kind: 'list',
    make(rng) {
      const [xs] = names(rng, LIST_NAMES, 1);
      const k = rng.int(1, 5);
      return {
        main: {
          name: rng.pick([`rotate_left_${k}`, 'rotate', 'shift_left']),
          params: [ints(xs)],
          returns: 'list[int]',
          doc: `Rotate the non-empty list ${xs} left by ${k} positions (wrapping around).`,
          body: [`k = ${k} % len(${xs})`, `return ${xs}[k:] + ${xs}[:k]`],
        },
        cases: makeCases(
          rng,
          () => [intList(rng, 1, 7, 0, 9)],
          (v: number[]) => {
            const r = k % v.length;
            return [...v.slice(r), ...v.slice(0, r)];
          },
        ),
      };
    },
  },
  {
    id: 'chunk',
    kind: 'list',
    make(rng) {
      const [xs] = names(rng, LIST_NAMES, 1);
      const k = rng.int(2, 4);
      return {
        main: {
          name: rng.pick([`chunks_of_${k}`, 'chunk', 'split_into_groups']),
          params: [ints(xs)],
          returns: 'list[list[int]]',
          doc: `Split ${xs} into consecutive groups of ${k}; the last group may be shorter.`,
          body: [`return [${xs}[i:i + ${k}] for i in range(0, len(${xs}), ${k})]`],
        },
        cases: makeCases(
          rng,
          () => [intList(rng, 0, 9, 0, 9)],
          (v: number[]) => {
            const out: PyValue[] = [];
            for (let i = 0; i < v.length; i += k) out.push(v.slice(i, i + k));
            return out;
          },
        ),
      };
    },
  },
  {
    id: 'interleave',
    kind: 'list',
    make(rng) {
      const [a, b] = rng.pick([
        ['a', 'b'],
        ['first', 'second'],
        ['left', 'right'],
        ['xs', 'ys'],
      ]);
      return {
        main: {
          name: rng.pick(['interleave', 'alternate', 'weave']),
          params: [ints(a), ints(b)],
          returns: 'list[int]',
          doc: `Alternate elements from ${a} and ${b}, starting with ${a}; leftovers of the longer list go at the end.`,
          body: [
            'out = []',
            `for i in range(max(len(${a}), len(${b}))):`,
            `    if i < len(${a}):`,
            `        out.append(${a}[i])`,
            `    if i < len(${b}):`,
            `        out.append(${b}[i])`,
            'return out',
          ],
        },
        cases: makeCases(
          rng,
          () => [intList(rng, 0, 4, 0, 9), intList(rng, 0, 4, 10, 19)],
          (x: number[], y: number[]) => {
            const out: number[] = [];
            for (let i = 0; i < Math.max(x.length, y.length); i++) {
              if (i < x.length) out.push(x[i]);
              if (i < y.length) out.push(y[i]);
            }
            return out;
          },
        ),
      };
    },
  },
  {
    id: 'first_index_above',
    kind: 'list',
    make(rng) {
      const [xs] = names(rng, LIST_NAMES, 1);
      const t = rng.int(0, 20);
      return {
        main: {
          name: rng.pick(['first_index_above', 'find_first_greater', 'index_of_first_big']),
          params: [ints(xs)],
          returns: 'int',
          doc: `Return the index of the first element of ${xs} greater than ${t}, or -1 if there is none.`,
          body: [`for i, v in enumerate(${xs}):`, `    if v > ${t}:`, '        return i', 'return -1'],
        },
        cases: makeCases(
          rng,
          () => [intList(rng, 0, 7, 0, 30)],
          (v: number[]) => v.findIndex((x) => x > t),
        ),
      };
    },
  },
  {
    id: 'dot',
    kind: 'list',
    make(rng) {
      const [a, b] = rng.pick([
        ['a', 'b'],
        ['u', 'v'],
        ['xs', 'ys'],
      ]);
      return {
        main: {
          name: rng.pick(['dot', 'dot_product', 'inner_product']),
          params: [ints(a), ints(b)],
          returns: 'int',
          doc: `Return the dot product of the equal-length lists ${a} and ${b}.`,
          body: rng.chance(0.5)
            ? [`return sum(x * y for x, y in zip(${a}, ${b}))`]
            : ['total = 0', `for i in range(len(${a})):`, `    total += ${a}[i] * ${b}[i]`, 'return total'],
        },
        cases: makeCases(
          rng,
          () => {
            const n = rng.int(0, 5);
            return [intList(rng, n, n, -5, 9), intList(rng, n, n, -5, 9)];
          },
          (x: number[], y: number[]) => x.reduce((s, v, i) => s + v * y[i], 0),
        ),
      };
    },
  },
  {
    id: 'flatten',
    kind: 'list',
    make(rng) {
      const [xs] = names(rng, ['nested', 'groups', 'rows', 'lists'], 1);
      return {
        main: {
          name: rng.pick(['flatten', 'concat_all', 'join_lists']),
          params: [[xs, 'list[list[int]]']],
          returns: 'list[int]',
          doc: `Concatenate the lists in ${xs} into one list, in order.`,
          body: rng.chance(0.5) ? [`return [v for row in ${xs} for v in row]`] : ['out = []', `for row in ${xs}:`, '    out.extend(row)', 'return out'],
        },
        cases: makeCases(
          rng,
          () => [Array.from({ length: rng.int(0, 4) }, () => intList(rng, 0, 3, 0, 9))],
          (v: number[][]) => v.flat(),
        ),
      };
    },
  },
  {
    id: 'count_negatives',
    kind: 'list',
    make(rng) {
      const [xs] = names(rng, LIST_NAMES, 1);
      const neg = rng.chance(0.5);
      return {
        main: {
          name: rng.pick(neg ? ['count_negatives', 'num_negative'] : ['count_positives', 'num_positive']),
          params: [ints(xs)],
          returns: 'int',
          doc: `Return how many elements of ${xs} are ${neg ? 'below' : 'above'} zero.`,
          body: [`return len([v for v in ${xs} if v ${neg ? '<' : '>'} 0])`],
        },
        cases: makeCases(
          rng,
          () => [intList(rng, 0, 8, -9, 9)],
          (v: number[]) => v.filter((x) => (neg ? x < 0 : x > 0)).length,
        ),
      };
    },
  },
  {
    id: 'product',
    kind: 'list',
    make(rng) {
      const [xs] = names(rng, LIST_NAMES, 1);
      return {
        main: {
          name: rng.pick(['product', 'multiply_all', 'prod']),
          params: [ints(xs)],
          returns: 'int',
          doc: `Return the product of the elements of ${xs} (1 for an empty list).`,
          body: ['result = 1', `for v in ${xs}:`, '    result *= v', 'return result'],
        },
        cases: makeCases(
          rng,
          () => [intList(rng, 0, 6, -4, 9)],
          (v: number[]) => v.reduce((a, b) => a * b, 1),
        ),
      };
    },
  },
  {
    id: 'argmax',
    kind: 'list',
    make(rng) {
      const [xs] = names(rng, LIST_NAMES, 1);
      const min = rng.chance(0.4);
      return {
        main: {
          name: rng.pick(min ? ['argmin', 'index_of_min'] : ['argmax', 'index_of_max']),
          params: [ints(xs)],
          returns: 'int',
          doc: `Return the index of the ${min ? 'smallest' : 'largest'} element of the non-empty list ${xs} (the first one on ties).`,
          body: ['best = 0', `for i in range(1, len(${xs})):`, `    if ${xs}[i] ${min ? '<' : '>'} ${xs}[best]:`, '        best = i', 'return best'],
        },
        cases: makeCases(
          rng,
          () => [intList(rng, 1, 7, 0, 9)],
          (v: number[]) => {
            let best = 0;
            for (let i = 1; i < v.length; i++) if (min ? v[i] < v[best] : v[i] > v[best]) best = i;
            return best;
          },
        ),
      };
    },
  },
  {
    id: 'cap_values',
    kind: 'list',
    make(rng) {
      const [xs] = names(rng, LIST_NAMES, 1);
      const cap = rng.int(3, 20);
      return {
        main: {
          name: rng.pick(['cap_values', 'limit_all', 'cap_at']),
          params: [ints(xs)],
          returns: 'list[int]',
          doc: `Return ${xs} with every element larger than ${cap} replaced by ${cap}.`,
          body: [`return [min(v, ${cap}) for v in ${xs}]`],
        },
        cases: makeCases(
          rng,
          () => [intList(rng, 0, 7, 0, 30)],
          (v: number[]) => v.map((x) => Math.min(x, cap)),
        ),
      };
    },
  },
  {
    id: 'is_sorted',
    kind: 'list',
    make(rng) {
      const [xs] = names(rng, LIST_NAMES, 1);
      return {
        main: {
          name: rng.pick(['is_sorted', 'is_non_decreasing', 'in_order']),
          params: [ints(xs)],
          returns: 'bool',
          doc: `Return True if each element of ${xs} is at least as large as the one before it.`,
          body: rng.chance(0.5)
            ? [`return all(a <= b for a, b in zip(${xs}, ${xs}[1:]))`]
            : [`for i in range(len(${xs}) - 1):`, `    if ${xs}[i] > ${xs}[i + 1]:`, '        return False', 'return True'],
        },
        cases: makeCases(
          rng,
          () => {
            const v = intList(rng, 0, 6, 0, 9);
            return [rng.chance(0.5) ? v.sort((a, b) => a - b) : v];
          },
          (v: number[]) => v.every((x, i) => i === 0 || v[i - 1] <= x),
        ),
      };
    },
  },
];
