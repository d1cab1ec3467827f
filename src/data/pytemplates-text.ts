/** String task templates over ASCII words and sentences. */
import { letter, makeCases, names, type PyTemplate, STR_NAMES, sentence, WORD_NAMES, word } from './pykit.js';
import type { Rng } from './rng.js';

const str = (name: string) => [name, 'str'] as const;
const VOWELS = 'aeiou';

/** A sentence, sometimes with capitals, so case handling is exercised. */
function mixedSentence(rng: Rng, lo: number, hi: number): string {
  return sentence(rng, lo, hi)
    .split(' ')
    .map((w) => (rng.chance(0.25) ? w[0].toUpperCase() + w.slice(1) : w))
    .join(' ');
}

export const TEXT_TEMPLATES: PyTemplate[] = [
  {
    id: 'reverse_string',
    kind: 'string',
    make(rng) {
      const [s] = names(rng, STR_NAMES, 1);
      const body = rng.pick([
        [`return ${s}[::-1]`],
        [`return ''.join(reversed(${s}))`],
        ["result = ''", `for ch in ${s}:`, '    result = ch + result', 'return result'],
      ]);
      return {
        main: { name: rng.pick(['reverse_string', 'reverse_text', 'backwards']), params: [str(s)], returns: 'str', doc: `Return ${s} reversed.`, body },
        cases: makeCases(
          rng,
          () => [sentence(rng, 1, 3)],
          (v: string) => [...v].reverse().join(''),
        ),
      };
    },
  },
  {
    id: 'count_char',
    kind: 'string',
    make(rng) {
      const [s] = names(rng, STR_NAMES, 1);
      const c = rng.pick([...'aeiorstnl']);
      return {
        main: {
          name: rng.pick([`count_${c}`, `number_of_${c}s`, `${c}_count`]),
          params: [str(s)],
          returns: 'int',
          doc: `Return how many times the letter '${c}' occurs in ${s}.`,
          body: rng.chance(0.5)
            ? [`return ${s}.count('${c}')`]
            : ['count = 0', `for ch in ${s}:`, `    if ch == '${c}':`, '        count += 1', 'return count'],
        },
        cases: makeCases(
          rng,
          () => [sentence(rng, 1, 5)],
          (v: string) => [...v].filter((ch) => ch === c).length,
        ),
      };
    },
  },
  {
    id: 'count_vowels',
    kind: 'string',
    make(rng) {
      const [s] = names(rng, STR_NAMES, 1);
      return {
        main: {
          name: rng.pick(['count_vowels', 'vowel_count', 'num_vowels']),
          params: [str(s)],
          returns: 'int',
          doc: `Return the number of vowels (a, e, i, o, u, either case) in ${s}.`,
          body: rng.chance(0.5)
            ? [`return sum(1 for ch in ${s}.lower() if ch in 'aeiou')`]
            : ['count = 0', `for ch in ${s}:`, "    if ch.lower() in 'aeiou':", '        count += 1', 'return count'],
        },
        cases: makeCases(
          rng,
          () => [mixedSentence(rng, 1, 5)],
          (v: string) => [...v.toLowerCase()].filter((ch) => VOWELS.includes(ch)).length,
        ),
      };
    },
  },
  {
    id: 'is_palindrome',
    kind: 'string',
    make(rng) {
      const [s] = names(rng, WORD_NAMES, 1);
      return {
        main: {
          name: rng.pick(['is_palindrome', 'palindrome', 'reads_same_backwards']),
          params: [str(s)],
          returns: 'bool',
          doc: `Return True if ${s} reads the same forwards and backwards, ignoring case.`,
          body: rng.chance(0.5)
            ? [`cleaned = ${s}.lower()`, 'return cleaned == cleaned[::-1]']
            : [
                `low = ${s}.lower()`,
                'i, j = 0, len(low) - 1',
                'while i < j:',
                '    if low[i] != low[j]:',
                '        return False',
                '    i += 1',
                '    j -= 1',
                'return True',
              ],
        },
        cases: makeCases(
          rng,
          () => [rng.chance(0.3) ? word(rng).toUpperCase() : word(rng)],
          (v: string) => v.toLowerCase() === [...v.toLowerCase()].reverse().join(''),
        ),
      };
    },
  },
  {
    id: 'capitalize_words',
    kind: 'string',
    make(rng) {
      const [s] = names(rng, STR_NAMES, 1);
      return {
        main: {
          name: rng.pick(['capitalize_words', 'title_case', 'capitalize_each']),
          params: [str(s)],
          returns: 'str',
          doc: `Return ${s} with the first letter of every space-separated word in upper case and the rest in lower case.`,
          body: rng.chance(0.5)
            ? [`return ' '.join(w.capitalize() for w in ${s}.split(' '))`]
            : ['parts = []', `for w in ${s}.split(' '):`, '    parts.append(w[:1].upper() + w[1:].lower())', "return ' '.join(parts)"],
        },
        cases: makeCases(
          rng,
          () => [mixedSentence(rng, 1, 5)],
          (v: string) =>
            v
              .split(' ')
              .map((w) => w.slice(0, 1).toUpperCase() + w.slice(1).toLowerCase())
              .join(' '),
        ),
      };
    },
  },
  {
    id: 'repeat_chars',
    kind: 'string',
    make(rng) {
      const [s] = names(rng, WORD_NAMES, 1);
      const k = rng.int(2, 4);
      return {
        main: {
          name: rng.pick([`repeat_each_${k}`, 'stretch', 'repeat_letters']),
          params: [str(s)],
          returns: 'str',
          doc: `Return ${s} with every character repeated ${k} times.`,
          body: rng.chance(0.5) ? [`return ''.join(ch * ${k} for ch in ${s})`] : ["out = ''", `for ch in ${s}:`, `    out += ch * ${k}`, 'return out'],
        },
        cases: makeCases(
          rng,
          () => [word(rng).slice(0, rng.int(1, 5))],
          (v: string) => [...v].map((ch) => ch.repeat(k)).join(''),
        ),
      };
    },
  },
  {
    id: 'replace_char',
    kind: 'string',
    make(rng) {
      const [s] = names(rng, STR_NAMES, 1);
      const from = rng.pick([...'aeiost ']);
      const to = rng.pick(['*', '-', '_', '#', letter(rng)].filter((c) => c !== from));
      const fromText = from === ' ' ? 'space' : `'${from}'`;
      return {
        main: {
          name: rng.pick(['replace_char', 'swap_symbol', 'substitute']),
          params: [str(s)],
          returns: 'str',
          doc: `Return ${s} with every ${fromText} replaced by '${to}'.`,
          body: rng.chance(0.5) ? [`return ${s}.replace('${from}', '${to}')`] : [`return ''.join('${to}' if ch == '${from}' else ch for ch in ${s})`],
        },
        cases: makeCases(
          rng,
          () => [sentence(rng, 1, 4)],
          (v: string) => v.split(from).join(to),
        ),
      };
    },
  },
  {
    id: 'remove_vowels',
    kind: 'string',
    make(rng) {
      const [s] = names(rng, STR_NAMES, 1);
      return {
        main: {
          name: rng.pick(['remove_vowels', 'strip_vowels', 'disemvowel']),
          params: [str(s)],
          returns: 'str',
          doc: `Return ${s} without its lowercase vowels (a, e, i, o, u).`,
          body: rng.chance(0.5)
            ? [`return ''.join(ch for ch in ${s} if ch not in 'aeiou')`]
            : ["out = ''", `for ch in ${s}:`, "    if ch not in 'aeiou':", '        out += ch', 'return out'],
        },
        cases: makeCases(
          rng,
          () => [sentence(rng, 1, 4)],
          (v: string) => [...v].filter((ch) => !VOWELS.includes(ch)).join(''),
        ),
      };
    },
  },
  {
    id: 'acronym',
    kind: 'string',
    make(rng) {
      const [s] = names(rng, STR_NAMES, 1);
      return {
        main: {
          name: rng.pick(['acronym', 'initials', 'abbreviate']),
          params: [str(s)],
          returns: 'str',
          doc: `Return the upper-case first letters of the words in ${s}.`,
          body: rng.chance(0.5)
            ? [`return ''.join(w[0].upper() for w in ${s}.split())`]
            : ["out = ''", `for w in ${s}.split():`, '    out += w[0].upper()', 'return out'],
        },
        cases: makeCases(
          rng,
          () => [sentence(rng, 2, 5)],
          (v: string) =>
            v
              .split(' ')
              .map((w) => w[0].toUpperCase())
              .join(''),
        ),
      };
    },
  },
  {
    id: 'word_count',
    kind: 'string',
    make(rng) {
      const [s] = names(rng, STR_NAMES, 1);
      const min = rng.int(0, 4);
      const what = min === 0 ? 'words' : `words longer than ${min} letters`;
      const filter = min === 0 ? '' : ` if len(w) > ${min}`;
      return {
        main: {
          name: rng.pick(min === 0 ? ['word_count', 'count_words', 'num_words'] : ['count_long_words', `words_over_${min}`]),
          params: [str(s)],
          returns: 'int',
          doc: `Return the number of ${what} in ${s}, where words are separated by spaces.`,
          body: min === 0 ? [`return len(${s}.split())`] : [`return sum(1 for w in ${s}.split()${filter})`],
        },
        cases: makeCases(
          rng,
          () => [sentence(rng, 0, 7)],
          (v: string) => v.split(' ').filter((w) => w.length > min).length,
        ),
      };
    },
  },
  {
    id: 'longest_word',
    kind: 'string',
    make(rng) {
      const [s] = names(rng, STR_NAMES, 1);
      const shortest = rng.chance(0.3);
      const op = shortest ? '<' : '>';
      return {
        main: {
          name: rng.pick(shortest ? ['shortest_word', 'smallest_word'] : ['longest_word', 'biggest_word']),
          params: [str(s)],
          returns: 'str',
          doc: `Return the ${shortest ? 'shortest' : 'longest'} word in ${s}; on a tie return the one that comes first.`,
          body: [`words = ${s}.split()`, 'best = words[0]', 'for w in words[1:]:', `    if len(w) ${op} len(best):`, '        best = w', 'return best'],
        },
        cases: makeCases(
          rng,
          () => [sentence(rng, 1, 6)],
          (v: string) => v.split(' ').reduce((best, w) => ((shortest ? w.length < best.length : w.length > best.length) ? w : best)),
        ),
      };
    },
  },
  {
    id: 'caesar',
    kind: 'string',
    make(rng) {
      const [s] = names(rng, STR_NAMES, 1);
      const k = rng.int(1, 25);
      return {
        main: {
          name: rng.pick([`shift_letters_${k}`, 'caesar_cipher', 'rotate_letters']),
          params: [str(s)],
          returns: 'str',
          doc: `Shift every lowercase letter in ${s} forward by ${k} places in the alphabet (wrapping from z to a); leave other characters alone.`,
          body: [
            "out = ''",
            `for ch in ${s}:`,
            "    if 'a' <= ch <= 'z':",
            `        out += chr((ord(ch) - ord('a') + ${k}) % 26 + ord('a'))`,
            '    else:',
            '        out += ch',
            'return out',
          ],
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
    id: 'wrap',
    kind: 'string',
    make(rng) {
      const [s] = names(rng, WORD_NAMES, 1);
      const [open, close] = rng.pick([
        ['<', '>'],
        ['[', ']'],
        ['(', ')'],
        ['**', '**'],
        ['"', '"'],
        ['{', '}'],
      ]);
      const q = (t: string) => (t.includes('"') ? `'${t}'` : `"${t}"`);
      const braces = (t: string) => t.replace(/[{}]/g, '$&$&');
      return {
        main: {
          name: rng.pick(['wrap', 'surround', 'enclose', 'decorate']),
          params: [str(s)],
          returns: 'str',
          doc: `Return ${s} wrapped as ${open}${s}${close}.`,
          body: rng.chance(0.5) ? [`return ${q(open)} + ${s} + ${q(close)}`] : [`return f${q(`${braces(open)}{${s}}${braces(close)}`)}`],
        },
        cases: makeCases(
          rng,
          () => [word(rng)],
          (v: string) => open + v + close,
        ),
      };
    },
  },
  {
    id: 'run_length',
    kind: 'string',
    make(rng) {
      const [s] = names(rng, WORD_NAMES, 1);
      return {
        main: {
          name: rng.pick(['run_length_encode', 'compress', 'rle']),
          params: [str(s)],
          returns: 'str',
          doc: `Run-length encode ${s}: each run of equal characters becomes the character followed by the run length, e.g. 'aab' -> 'a2b1'.`,
          body: [
            "out = ''",
            'i = 0',
            `while i < len(${s}):`,
            '    j = i',
            `    while j < len(${s}) and ${s}[j] == ${s}[i]:`,
            '        j += 1',
            `    out += ${s}[i] + str(j - i)`,
            '    i = j',
            'return out',
          ],
        },
        cases: makeCases(
          rng,
          () => [Array.from({ length: rng.int(1, 4) }, () => 'abc'[rng.int(0, 2)].repeat(rng.int(1, 4))).join('')],
          (v: string) => (v.match(/(.)\1*/g) ?? []).map((run) => run[0] + run.length).join(''),
        ),
      };
    },
  },
  {
    id: 'swap_case',
    kind: 'string',
    make(rng) {
      const [s] = names(rng, STR_NAMES, 1);
      return {
        main: {
          name: rng.pick(['swap_case', 'invert_case', 'flip_case']),
          params: [str(s)],
          returns: 'str',
          doc: `Return ${s} with upper-case letters made lower case and lower-case letters made upper case.`,
          body: rng.chance(0.5) ? [`return ${s}.swapcase()`] : [`return ''.join(ch.lower() if ch.isupper() else ch.upper() for ch in ${s})`],
        },
        cases: makeCases(
          rng,
          () => [mixedSentence(rng, 1, 4)],
          (v: string) => [...v].map((ch) => (ch === ch.toUpperCase() ? ch.toLowerCase() : ch.toUpperCase())).join(''),
        ),
      };
    },
  },
  {
    id: 'alternate_case',
    kind: 'string',
    make(rng) {
      const [s] = names(rng, WORD_NAMES, 1);
      const upperFirst = rng.chance(0.5);
      const [even, odd] = upperFirst ? ['upper', 'lower'] : ['lower', 'upper'];
      return {
        main: {
          name: rng.pick(['alternate_case', 'zigzag_case', 'sponge_case']),
          params: [str(s)],
          returns: 'str',
          doc: `Return ${s} with characters at even indexes in ${even} case and at odd indexes in ${odd} case.`,
          body: [`return ''.join(ch.${even}() if i % 2 == 0 else ch.${odd}() for i, ch in enumerate(${s}))`],
        },
        cases: makeCases(
          rng,
          () => [word(rng)],
          (v: string) => [...v].map((ch, i) => ((i % 2 === 0) === upperFirst ? ch.toUpperCase() : ch.toLowerCase())).join(''),
        ),
      };
    },
  },
  {
    id: 'first_repeated_char',
    kind: 'string',
    make(rng) {
      const [s] = names(rng, WORD_NAMES, 1);
      return {
        main: {
          name: rng.pick(['first_repeated_char', 'first_duplicate_letter']),
          params: [str(s)],
          returns: 'str',
          doc: `Return the first character of ${s} that appears for a second time, or '' if no character repeats.`,
          body: ['seen = set()', `for ch in ${s}:`, '    if ch in seen:', '        return ch', '    seen.add(ch)', "return ''"],
        },
        cases: makeCases(
          rng,
          () => [word(rng)],
          (v: string) => {
            const seen = new Set<string>();
            for (const ch of v) {
              if (seen.has(ch)) return ch;
              seen.add(ch);
            }
            return '';
          },
        ),
      };
    },
  },
  {
    id: 'pad_left',
    kind: 'string',
    make(rng) {
      const [s] = names(rng, WORD_NAMES, 1);
      const width = rng.int(5, 10);
      const fill = rng.pick(['.', '*', '0', '-', '#']);
      return {
        main: {
          name: rng.pick(['pad_left', 'right_align', 'left_pad']),
          params: [str(s)],
          returns: 'str',
          doc: `Pad ${s} on the left with '${fill}' to width ${width}; longer strings are returned unchanged.`,
          body: rng.chance(0.5) ? [`return ${s}.rjust(${width}, '${fill}')`] : [`return '${fill}' * (${width} - len(${s})) + ${s}`],
        },
        cases: makeCases(
          rng,
          () => [word(rng)],
          (v: string) => v.padStart(width, fill),
        ),
      };
    },
  },
];

export function caesar(v: string, k: number): string {
  return [...v].map((ch) => (ch >= 'a' && ch <= 'z' ? String.fromCharCode(((ch.charCodeAt(0) - 97 + k) % 26) + 97) : ch)).join('');
}
