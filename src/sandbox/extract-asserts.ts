/**
 * HumanEval-style test extraction, reproducing `extract_test_cases` of the reference coding reward
 * (OpenMLRL/LLM_Collab_Code_Generation, rewards/code_utils.py; docs/environments.md "Coding tests
 * in the sandbox").
 *
 * Rule:
 *   1. body = text after `def check(candidate):` up to the first "\n\ndef" (or the end);
 *   2. keep each stripped line that starts with `assert`, then whitespace, and later contains
 *      `candidate`; multi-line asserts and asserts using loop variables are therefore taken as a
 *      single (often failing) line or not at all;
 *   3. deduplicate, keeping first occurrences;
 *   4. replace every occurrence of the text `candidate` with the entry point. This is a plain
 *      string replace: `candidate_list` becomes `<entryPoint>_list` (a known reference quirk).
 */

// Python's str.strip()/`\s` whitespace set, which differs from JS trim()/\s (\x1c-\x1f, \x85; no \ufeff).
const PY_SPACE = '\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const PY_STRIP = new RegExp(`^[${PY_SPACE}]+|[${PY_SPACE}]+$`, 'g');
const ASSERT_LINE = new RegExp(`^assert[${PY_SPACE}]+[^\\n]*candidate`);
const CHECK_BODY = /def check\(candidate\):([\s\S]*?)(?=\n\ndef|$)/;

/** The reference's single-line assert list for one problem, with `candidate` renamed to `entryPoint`. */
export function extractAsserts(testSource: string, entryPoint: string): string[] {
  if (!testSource || !entryPoint) return [];
  const body = CHECK_BODY.exec(testSource);
  if (!body) return [];
  const kept = new Set<string>();
  for (const raw of body[1].split('\n')) {
    const line = raw.replace(PY_STRIP, '');
    if (ASSERT_LINE.test(line)) kept.add(line);
  }
  return [...kept].map((line) => line.replaceAll('candidate', entryPoint));
}
