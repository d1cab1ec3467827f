/** The writing environments' faithfulness columns: computed against each item's post, per agent and for the pair. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EpisodeResult } from '../../../src/envs/environment.js';
import { postText, tldrEnvironment } from '../../../src/envs/writing/index.js';

const POST =
  'SOURCE: Reddit\n\nPOST: My landlord raised the rent by forty percent this year and still refuses to fix the broken heating in my apartment.\n\nTL;DR:';

const episode = (completions: string[]): EpisodeResult => ({ index: 0, completions, reward: 0, components: {}, responseSeconds: 0, outputTokens: 0 });

describe('writing faithfulness columns', () => {
  const env = tldrEnvironment();
  const item = { prompt: POST };

  it('postText drops the SOURCE header and the trailing TL;DR:', () => {
    assert.equal(postText(POST), 'My landlord raised the rent by forty percent this year and still refuses to fix the broken heating in my apartment.');
    assert.equal(postText('just a post'), 'just a post');
  });

  it('a copying agent, an unrelated agent, and the echo between them', () => {
    const copy = 'my landlord raised the rent by forty percent this year and still refuses';
    const m = env.metrics([episode([copy, 'Quantum computers factor integers with qubits.'])], [item]);
    assert.equal(m['copied_8/agent_0'], 100);
    assert.equal(m['content_support/agent_0'], 100);
    assert.equal(m['content_support/agent_1'], 0);
    assert.equal(m.content_support, 0, 'the weaker agent');
    assert.equal(m.copied_8, 100, 'the more copying agent');
    assert.equal(m.echo, 0);
    assert.equal(m['words/agent_0'], 13);
    const same = env.metrics([episode(['the rent went up', 'The rent went up.'])], [item]);
    assert.equal(same.echo, 100);
    assert.equal(same['copied_8/agent_1'], 0, 'the SOURCE header and TL;DR marker are not the post');
  });
});
