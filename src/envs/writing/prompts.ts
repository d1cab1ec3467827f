/**
 * Every prompt of the writing environments, verbatim from the authors' code: the MAGRPO agents'
 * formatters (OpenMLRL/LLM_Collab_Writing, train_magrpo.py) and the paper-era baselines
 * (baselines/{tldr,arxiv}_{single_agent,sequential,discuss}.py @3198dc9, read in the fork
 * junho328/LLM_Collab_Code_Generation). Raw text, no chat template, as the paper-era trainer.
 * An empty source text gives the same error string the reference formatters return.
 */
import { pySplit } from './text-stats.js';

/** The reference formatters' answer to an empty source text. */
export const orError = (text: string, what: 'prompt' | 'abstract', prompt: () => string) => (text ? prompt() : `Error: No ${what} provided.`);

/** TLDR agent 1, the "summary agent": a concise summary of the post. */
export function tldrSummaryPrompt(post: string): string {
  return orError(
    post,
    'prompt',
    () => `Create a concise summary response to this post.

Query:
${post}

IMPORTANT INSTRUCTIONS:
- Provide a brief, focused summary in one sentence or a few sentences
- Be factual and informative
`,
  );
}

/** TLDR agent 2, the "elaboration agent": a detailed summary with rich vocabulary and transitions. */
export function tldrElaborationPrompt(post: string): string {
  return orError(
    post,
    'prompt',
    () => `Create a detailed summary response to this post.

Original Query:
${post}

IMPORTANT INSTRUCTIONS:
- Use more unique words
- Use some transition words to improve flow
`,
  );
}

/** arXiv agent 1: background and motivation of an introduction. */
export function arxivBackgroundPrompt(abstract: string): string {
  return orError(
    abstract,
    'abstract',
    () => `Based on the following scientific abstract, expand content for an introduction section.

Abstract:
${abstract}

IMPORTANT INSTRUCTIONS:
- There is another agent that will provide methodology and implications
- You just need to focus on background and motivation
- Avoid repeating methodology and implications content
`,
  );
}

/** arXiv agent 2: methodology and implications of an introduction. */
export function arxivMethodsPrompt(abstract: string): string {
  return orError(
    abstract,
    'abstract',
    () => `Based on the following scientific abstract, expand content for an introduction section.

Abstract:
${abstract}

IMPORTANT INSTRUCTIONS:
- There is another agent that will provide the background and motivation
- You just need to focus on methodology and implications
- Avoid repeating background and motivation content
`,
  );
}

/** The delimiter the single-agent baseline is asked to put between its two paragraphs. */
export const PARAGRAPH_SPLIT = '[PARAGRAPH_SPLIT]';

/** The baselines' prompts for one environment (the source text is the post or the abstract). */
export interface BaselinePrompts {
  /** One model writes both parts, separated by PARAGRAPH_SPLIT. */
  single(source: string): string;
  /** When the delimiter is missing: paragraph 2 / paragraph 1 length ratio, drawn uniformly. */
  fallbackRatio: readonly [number, number];
  /** Sequential pipeline: agent 1 first, then agent 2 sees agent 1's (stripped) response. */
  sequential: readonly [(source: string) => string, (source: string, first: string) => string];
  /** One-round discussion: independent round 1, then each agent sees the other's round-1 text. */
  discussRound1: readonly [(source: string) => string, (source: string) => string];
  discussRound2: readonly [(source: string, other: string) => string, (source: string, other: string) => string];
}

/** Python's `str()` of a float: shortest round-trip digits, and ".0" when integral. */
function pyFloat(x: number): string {
  return Number.isInteger(x) ? `${x}.0` : String(x);
}

export const TLDR_BASELINE_PROMPTS: BaselinePrompts = {
  single: (post) =>
    orError(
      post,
      'prompt',
      () => `Please provide a summary of this Reddit post in exactly two paragraphs:

${post}

Instructions:
- First paragraph: Provide a concise summary of the main points
- Second paragraph: Expand on the summary with more details, using more unique vocabulary words, include as many categories of transition words as possible to improve flow, and make it 2-3 times longer than the first paragraph in terms of character count, while maintaining a consistent style

IMPORTANT REQUIREMENTS - FOLLOW EXACTLY:
- No paragraph should be less than 10 tokens or more than 200 tokens
- Use EXACTLY this delimiter between paragraphs: ${PARAGRAPH_SPLIT}

Summary:
Paragraph 1:`,
    ),
  fallbackRatio: [2.0, 3.0],
  sequential: [
    (post) =>
      orError(
        post,
        'prompt',
        () => `Create a concise summary response to this post.

Query:
${post}

IMPORTANT INSTRUCTIONS:
- Provide a brief, focused summary and be factual and informative

Summary:`,
      ),
    (post, first) =>
      orError(
        post,
        'prompt',
        // target = max(2 × words(agent 1), 80), an int in the reference
        () => `You are Agent 2 in a two-agent system. Your job is to create an improved summary based on Agent 1's initial response.

Original Query:
${post}

Agent 1's Response:
${first}

Your task is to create a better summary that:
1. Is approximately ${Math.max(pySplit(first).length * 2, 80)} words long (about 2-3 times longer than Agent 1's response)
2. Uses more unique vocabulary words than Agent 1
3. Includes transition words to improve flow
4. Maintains a consistent style with Agent 1 but expands meaningfully

Improved Summary:`,
      ),
  ],
  discussRound1: [
    (post) =>
      orError(
        post,
        'prompt',
        () => `Create a concise summary response to this post.

Query:
${post}

IMPORTANT INSTRUCTIONS:
- Provide a brief, focused summary in one sentence or a few sentences
- Be factual and informative

Summary:`,
      ),
    (post) =>
      orError(
        post,
        'prompt',
        () => `Create a detailed summary response to this post.

Original Query:
${post}

Create a concise summary response to this query:

IMPORTANT INSTRUCTIONS:
- Use more unique words
- Use some transition words to improve flow

Summary:`,
      ),
  ],
  discussRound2: [
    (post, other) =>
      orError(
        post,
        'prompt',
        () => `Create a concise summary response to this post.

Query:
${post}

Other Agent's Response:
${other}

IMPORTANT INSTRUCTIONS:
- Provide a brief, focused summary in one sentence or a few sentences
- Your response should be about 2-3 times shorter than the other agent's response
- You can refer to the other agent's response to improve your own response

Summary:`,
      ),
    (post, other) =>
      orError(
        post,
        'prompt',
        () => `Create a detailed summary response to this post.

Original Query:
${post}

Other Agent's Response:
${other}

Create a concise summary response to this query:

IMPORTANT INSTRUCTIONS:
- Use more unique words
- Use some transition words to improve flow
- You can refer to the other agent's response to improve your own response
- Your response should be about 2-3 times longer than the other agent's response

Summary:`,
      ),
  ],
};

export const ARXIV_BASELINE_PROMPTS: BaselinePrompts = {
  single: (abstract) =>
    orError(
      abstract,
      'prompt',
      () => `Please provide an expanded introduction of this abstract text in exactly two paragraphs with SAME LENGTH.

${abstract}

Instructions:
- First paragraph: Provide the background and motivation for this research, include as many categories of transition words as possible to improve flow.
- Second paragraph: Provide the framework, method, contribution, and the implications of this research, using same number of vocabulary words as the first paragraph, include as many categories of transition words as possible to improve flow, maintaining a consistent style
- IMPORTANT: Separate the two paragraphs with exactly this delimiter: ${PARAGRAPH_SPLIT}

Introduction:`,
    ),
  fallbackRatio: [1.0, 1.3],
  sequential: [
    (abstract) =>
      orError(
        abstract,
        'prompt',
        () => `Create an expanded introduction background to this abstract.

Query:
${abstract}

IMPORTANT INSTRUCTIONS:
- Provide an expanded background introduction to the abstract.
- Don't need to talk about the methodology or implications.

Summary:`,
      ),
    (abstract, first) =>
      orError(
        abstract,
        'prompt',
        () => `You are Agent 2 in a two-agent system. Your job is to create introduction based on Agent 1's initial response.

Original Query:
${abstract}

Agent 1's Response:
${first}

Your task is to create a complementary introduction that:
1. Is approximately ${sequentialArxivTarget(first)} words long (about 1.2 times longer than Agent 1's response)
2. Uses similar number of unique vocabulary words than Agent 1
3. Includes transition words to improve flow
4. Don't talk about the background and motivation of the abstract.

Improved Summary:`,
      ),
  ],
  discussRound1: [
    (abstract) =>
      orError(
        abstract,
        'prompt',
        () => `Expand on this abstract's background and motivation:

Query:
${abstract}

IMPORTANT INSTRUCTIONS:
- You don't need to mention methods or implications
- Use some transition words to improve flow

Introduction:`,
      ),
    (abstract) =>
      orError(
        abstract,
        'prompt',
        () => `Expand on this abstract's methods and implications:

Original Query:
${abstract}

IMPORTANT INSTRUCTIONS:
- You don't need to mention background or motivation
- Use some transition words to improve flow

Introduction:`,
      ),
  ],
  discussRound2: [
    (abstract, other) =>
      orError(
        abstract,
        'prompt',
        () => `Expand this abstract's background and motivation, there is another agent's response that you want to add your context before it:

Query:
${abstract}

Other Agent's Response:
${other}

IMPORTANT INSTRUCTIONS:
- Your response should be about 1.2 times shorter than the other agent's response
- You should use similar number of unique words as the other agent (except for stopwords)
- You should try to use some transition words to improve flow

Introduction:`,
      ),
    (abstract, other) =>
      orError(
        abstract,
        'prompt',
        () => `Expand this abstract's method and implications, there is another agent's response that you want to add your context after it:

Original Query:
${abstract}

Other Agent's Response:
${other}

Create a concise summary response to this query:

IMPORTANT INSTRUCTIONS:
- Your response should be about 1.2 times longer than the other agent's response
- You should use similar number of unique words as the other agent (except for stopwords)
- You should try to use some transition words to improve flow

Introduction:`,
      ),
  ],
};

/** The arXiv sequential target as Python prints `max(words * 1.2, 80)` (float unless 80 wins). */
export function sequentialArxivTarget(first: string): string {
  const scaled = pySplit(first).length * 1.2;
  return scaled > 80 ? pyFloat(scaled) : '80';
}
