/** The writing prompts, pinned verbatim against the authors' formatters (train_magrpo.py). */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  ARXIV_BASELINE_PROMPTS,
  arxivBackgroundPrompt,
  arxivMethodsPrompt,
  TLDR_BASELINE_PROMPTS,
  tldrElaborationPrompt,
  tldrSummaryPrompt,
} from '../../../src/envs/writing/prompts.js';

describe('MAGRPO agent prompts', () => {
  it('TLDR summary and elaboration agents', () => {
    assert.equal(
      tldrSummaryPrompt('P'),
      'Create a concise summary response to this post.\n\nQuery:\nP\n\nIMPORTANT INSTRUCTIONS:\n- Provide a brief, focused summary in one sentence or a few sentences\n- Be factual and informative\n',
    );
    assert.equal(
      tldrElaborationPrompt('P'),
      'Create a detailed summary response to this post.\n\nOriginal Query:\nP\n\nIMPORTANT INSTRUCTIONS:\n- Use more unique words\n- Use some transition words to improve flow\n',
    );
  });

  it('arXiv background and methodology agents', () => {
    const head = 'Based on the following scientific abstract, expand content for an introduction section.\n\nAbstract:\nA\n\nIMPORTANT INSTRUCTIONS:\n';
    assert.equal(
      arxivBackgroundPrompt('A'),
      `${head}- There is another agent that will provide methodology and implications\n- You just need to focus on background and motivation\n- Avoid repeating methodology and implications content\n`,
    );
    assert.equal(
      arxivMethodsPrompt('A'),
      `${head}- There is another agent that will provide the background and motivation\n- You just need to focus on methodology and implications\n- Avoid repeating background and motivation content\n`,
    );
  });

  it('an empty source gives the reference formatters’ error string', () => {
    assert.equal(tldrSummaryPrompt(''), 'Error: No prompt provided.');
    assert.equal(arxivMethodsPrompt(''), 'Error: No abstract provided.');
  });
});

describe('baseline prompts', () => {
  it('single agent: asks for [PARAGRAPH_SPLIT] and ends where paragraph 1 begins', () => {
    assert.ok(TLDR_BASELINE_PROMPTS.single('P').includes('- Use EXACTLY this delimiter between paragraphs: [PARAGRAPH_SPLIT]\n\nSummary:\nParagraph 1:'));
    assert.ok(ARXIV_BASELINE_PROMPTS.single('A').endsWith('exactly this delimiter: [PARAGRAPH_SPLIT]\n\nIntroduction:'));
    assert.deepEqual(TLDR_BASELINE_PROMPTS.fallbackRatio, [2.0, 3.0]);
    assert.deepEqual(ARXIV_BASELINE_PROMPTS.fallbackRatio, [1.0, 1.3]);
  });

  it('sequential TLDR: target max(2 × words of agent 1, 80)', () => {
    const first = Array(50).fill('w').join(' ');
    assert.ok(TLDR_BASELINE_PROMPTS.sequential[1]('P', first).includes('1. Is approximately 100 words long (about 2-3 times longer'));
    assert.ok(TLDR_BASELINE_PROMPTS.sequential[1]('P', 'few words').includes('Is approximately 80 words long'));
  });

  it('discussion round 2 carries the other agent’s response and the length instruction', () => {
    const p = ARXIV_BASELINE_PROMPTS.discussRound2[1]('A', 'OTHER');
    assert.ok(p.includes("Other Agent's Response:\nOTHER\n"));
    assert.ok(p.includes('- Your response should be about 1.2 times longer than the other agent'));
  });
});
