/** Dict task templates. */
import { DICT_NAMES, intList, LIST_NAMES, makeCases, names, type PyTemplate, STR_NAMES, sentence, WORDS_NAMES, word, wordList } from './pykit.js';
import type { PyDict } from './pyvalue.js';
import type { Rng } from './rng.js';

const ints = (name: string) => [name, 'list[int]'] as const;
const strDict = (name: string) => [name, 'dict[str, int]'] as const;

/** A str → int dict with distinct keys. */
function randomDict(rng: Rng, minLen: number, maxLen: number, lo: number, hi: number): PyDict {
  const keys = rng.sample(['a', 'b', 'c', 'x', 'y', 'apple', 'pear', 'plum', 'fig', 'kiwi', 'red', 'blue', 'tom', 'ann', 'joe'], rng.int(minLen, maxLen));
  return new Map(keys.map((k) => [k, rng.int(lo, hi)]));
}

export const DICT_TEMPLATES: PyTemplate[] = [
  {
    id: 'invert_dict',
    kind: 'dict',
    make(rng) {
      const [d] = names(rng, DICT_NAMES, 1);
      return {
        main: {
          name: rng.pick(['invert', 'invert_dict', 'swap_keys_and_values']),
          params: [strDict(d)],
          returns: 'dict[int, str]',
          doc: `Return a dict mapping each value of ${d} to its key (the values are distinct).`,
          body: rng.chance(0.5) ? [`return {v: k for k, v in ${d}.items()}`] : ['out = {}', `for k, v in ${d}.items():`, '    out[v] = k', 'return out'],
        },
        cases: makeCases(
          rng,
          () => {
            const m = randomDict(rng, 0, 4, 0, 99);
            const vals = rng.sample([...Array(100).keys()], m.size);
            return [new Map([...m.keys()].map((k, i) => [k, vals[i]]))];
          },
          (m: PyDict) => new Map([...m].map(([k, v]) => [v as number, k])),
        ),
      };
    },
  },
  {
    id: 'sum_values',
    kind: 'dict',
    make(rng) {
      const [d] = names(rng, DICT_NAMES, 1);
      return {
        main: {
          name: rng.pick(['sum_values', 'total_count', 'dict_total']),
          params: [strDict(d)],
          returns: 'int',
          doc: `Return the sum of all values in ${d}.`,
          body: rng.chance(0.5) ? [`return sum(${d}.values())`] : ['total = 0', `for key in ${d}:`, `    total += ${d}[key]`, 'return total'],
        },
        cases: makeCases(
          rng,
          () => [randomDict(rng, 0, 5, -5, 50)],
          (m: PyDict) => [...m.values()].reduce((a: number, b) => a + (b as number), 0),
        ),
      };
    },
  },
  {
    id: 'key_of_max',
    kind: 'dict',
    make(rng) {
      const [d] = names(rng, DICT_NAMES, 1);
      return {
        main: {
          name: rng.pick(['key_of_max', 'best_key', 'top_scorer']),
          params: [strDict(d)],
          returns: 'str',
          doc: `Return the key of the non-empty dict ${d} with the largest value (the earliest such key on ties).`,
          body: rng.chance(0.5)
            ? [`return max(${d}, key=${d}.get)`]
            : ['best = None', `for k, v in ${d}.items():`, `    if best is None or v > ${d}[best]:`, '        best = k', 'return best'],
        },
        cases: makeCases(
          rng,
          () => [randomDict(rng, 1, 5, 0, 9)],
          (m: PyDict) => {
            let best: string | null = null;
            for (const [k, v] of m) if (best === null || (v as number) > (m.get(best) as number)) best = k as string;
            return best;
          },
        ),
      };
    },
  },
  {
    id: 'word_counts',
    kind: 'dict',
    make(rng) {
      const [s] = names(rng, STR_NAMES, 1);
      return {
        main: {
          name: rng.pick(['word_counts', 'count_words_dict', 'word_frequencies']),
          params: [[s, 'str']],
          returns: 'dict[str, int]',
          doc: `Return a dict mapping each space-separated word of ${s} to how many times it occurs.`,
          body: rng.chance(0.5)
            ? ['counts = {}', `for w in ${s}.split():`, '    counts[w] = counts.get(w, 0) + 1', 'return counts']
            : ['from collections import Counter', '', `return dict(Counter(${s}.split()))`],
        },
        cases: makeCases(
          rng,
          () => [Array.from({ length: rng.int(0, 6) }, () => rng.pick(['a', 'the', 'cat', 'dog', 'sat'])).join(' ')],
          (v: string) => {
            const m: PyDict = new Map();
            for (const w of v.split(' ').filter((x) => x)) m.set(w, ((m.get(w) as number) ?? 0) + 1);
            return m;
          },
        ),
      };
    },
  },
  {
    id: 'merge_sum',
    kind: 'dict',
    make(rng) {
      const [a, b] = rng.pick([
        ['a', 'b'],
        ['first', 'second'],
        ['left', 'right'],
      ]);
      return {
        main: {
          name: rng.pick(['merge_sum', 'combine_counts', 'add_dicts']),
          params: [strDict(a), strDict(b)],
          returns: 'dict[str, int]',
          doc: `Merge ${a} and ${b} into a new dict; values of keys present in both are added.`,
          body: [`out = dict(${a})`, `for k, v in ${b}.items():`, '    out[k] = out.get(k, 0) + v', 'return out'],
        },
        cases: makeCases(
          rng,
          () => [randomDict(rng, 0, 3, 0, 9), randomDict(rng, 0, 3, 0, 9)],
          (x: PyDict, y: PyDict) => {
            const out: PyDict = new Map(x);
            for (const [k, v] of y) out.set(k, ((out.get(k) as number) ?? 0) + (v as number));
            return out;
          },
        ),
      };
    },
  },
  {
    id: 'group_by_length',
    kind: 'dict',
    make(rng) {
      const [ws] = names(rng, WORDS_NAMES, 1);
      return {
        main: {
          name: rng.pick(['group_by_length', 'bucket_by_length', 'words_by_size']),
          params: [[ws, 'list[str]']],
          returns: 'dict[int, list[str]]',
          doc: `Group the strings in ${ws} by length: return a dict from length to the strings of that length, in input order.`,
          body: ['groups = {}', `for w in ${ws}:`, '    groups.setdefault(len(w), []).append(w)', 'return groups'],
        },
        cases: makeCases(
          rng,
          () => [wordList(rng, 0, 5)],
          (v: string[]) => {
            const m: PyDict = new Map();
            for (const w of v) {
              const list = (m.get(w.length) as string[] | undefined) ?? [];
              list.push(w);
              m.set(w.length, list);
            }
            return m;
          },
        ),
      };
    },
  },
  {
    id: 'filter_dict',
    kind: 'dict',
    make(rng) {
      const [d] = names(rng, DICT_NAMES, 1);
      const t = rng.int(1, 8);
      return {
        main: {
          name: rng.pick(['filter_dict', 'keep_large', `at_least_${t}`]),
          params: [strDict(d)],
          returns: 'dict[str, int]',
          doc: `Return the entries of ${d} whose value is at least ${t}.`,
          body: [`return {k: v for k, v in ${d}.items() if v >= ${t}}`],
        },
        cases: makeCases(
          rng,
          () => [randomDict(rng, 0, 5, 0, 12)],
          (m: PyDict) => new Map([...m].filter(([, v]) => (v as number) >= t)),
        ),
      };
    },
  },
  {
    id: 'lookup_default',
    kind: 'dict',
    make(rng) {
      const [d] = names(rng, DICT_NAMES, 1);
      const [key] = names(rng, ['key', 'name', 'k'], 1);
      const dflt = rng.pick([0, -1, 1]);
      return {
        main: {
          name: rng.pick(['lookup', 'get_or_default', 'value_for']),
          params: [strDict(d), [key, 'str']],
          returns: 'int',
          doc: `Return ${d}[${key}] if ${key} is in ${d}, otherwise ${dflt}.`,
          body: rng.chance(0.5) ? [`return ${d}.get(${key}, ${dflt})`] : [`if ${key} in ${d}:`, `    return ${d}[${key}]`, `return ${dflt}`],
        },
        cases: makeCases(
          rng,
          () => [randomDict(rng, 1, 4, 0, 20), rng.pick(['a', 'b', 'x', 'fig', 'zed'])],
          (m: PyDict, k: string) => (m.has(k) ? (m.get(k) as number) : dflt),
        ),
      };
    },
  },
  {
    id: 'parity_counts',
    kind: 'dict',
    make(rng) {
      const [xs] = names(rng, LIST_NAMES, 1);
      return {
        main: {
          name: rng.pick(['parity_counts', 'count_even_odd', 'even_odd_tally']),
          params: [ints(xs)],
          returns: 'dict[str, int]',
          doc: `Return {'even': e, 'odd': o} where e and o count the even and odd elements of ${xs}.`,
          body: ["counts = {'even': 0, 'odd': 0}", `for v in ${xs}:`, "    counts['even' if v % 2 == 0 else 'odd'] += 1", 'return counts'],
        },
        cases: makeCases(
          rng,
          () => [intList(rng, 0, 7, 0, 20)],
          (v: number[]) =>
            new Map([
              ['even', v.filter((x) => x % 2 === 0).length],
              ['odd', v.filter((x) => x % 2 !== 0).length],
            ]),
        ),
      };
    },
  },
  {
    id: 'char_frequency',
    kind: 'dict',
    make(rng) {
      const [s] = names(rng, ['word', 's', 'text'], 1);
      return {
        main: {
          name: rng.pick(['char_frequency', 'letter_counts', 'count_chars']),
          params: [[s, 'str']],
          returns: 'dict[str, int]',
          doc: `Return a dict counting how often each character occurs in ${s}.`,
          body: ['freq = {}', `for ch in ${s}:`, '    freq[ch] = freq.get(ch, 0) + 1', 'return freq'],
        },
        cases: makeCases(
          rng,
          () => [word(rng)],
          (v: string) => {
            const m: PyDict = new Map();
            for (const ch of v) m.set(ch, ((m.get(ch) as number) ?? 0) + 1);
            return m;
          },
        ),
      };
    },
  },
  {
    id: 'keys_by_value',
    kind: 'dict',
    make(rng) {
      const [d] = names(rng, DICT_NAMES, 1);
      return {
        main: {
          name: rng.pick(['keys_by_value', 'rank_keys', 'sorted_keys']),
          params: [strDict(d)],
          returns: 'list[str]',
          doc: `Return the keys of ${d} sorted by their values, ascending; keys with equal values are ordered alphabetically.`,
          body: [`return sorted(${d}, key=lambda k: (${d}[k], k))`],
        },
        cases: makeCases(
          rng,
          () => [randomDict(rng, 0, 5, 0, 5)],
          (m: PyDict) => [...m.keys()].sort((a, b) => (m.get(a) as number) - (m.get(b) as number) || (a < b ? -1 : a > b ? 1 : 0)),
        ),
      };
    },
  },
  {
    id: 'increment_all',
    kind: 'dict',
    make(rng) {
      const [d] = names(rng, DICT_NAMES, 1);
      const c = rng.int(1, 10);
      return {
        main: {
          name: rng.pick(['increment_all', 'bump_values', `add_${c}_to_each`]),
          params: [strDict(d)],
          returns: 'dict[str, int]',
          doc: `Return a new dict with the same keys as ${d} and every value increased by ${c}.`,
          body: [`return {k: v + ${c} for k, v in ${d}.items()}`],
        },
        cases: makeCases(
          rng,
          () => [randomDict(rng, 0, 4, 0, 20)],
          (m: PyDict) => new Map([...m].map(([k, v]) => [k, (v as number) + c])),
        ),
      };
    },
  },
  {
    id: 'initials_index',
    kind: 'dict',
    make(rng) {
      const [s] = names(rng, STR_NAMES, 1);
      return {
        main: {
          name: rng.pick(['index_by_initial', 'first_letter_groups']),
          params: [[s, 'str']],
          returns: 'dict[str, list[str]]',
          doc: `Map each first letter to the words of ${s} starting with it, in order of appearance.`,
          body: ['index = {}', `for w in ${s}.split():`, '    index.setdefault(w[0], []).append(w)', 'return index'],
        },
        cases: makeCases(
          rng,
          () => [sentence(rng, 0, 5)],
          (v: string) => {
            const m: PyDict = new Map();
            for (const w of v.split(' ').filter((x) => x)) {
              const list = (m.get(w[0]) as string[] | undefined) ?? [];
              list.push(w);
              m.set(w[0], list);
            }
            return m;
          },
        ),
      };
    },
  },
];
