import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { upstreamChatRequest } from '../../api/services/openai-proxy/chat-proxy.ts';
import { chatPriceMicros, estimateTextTokens } from '../../core/chat-pricing.ts';
import type { ChatModel } from '../../core/catalog.ts';

// A chat call's reservation must cover what the provider bills for its input, or the excess is
// only debited as far as the balance goes: text outside ASCII, every field the provider reads,
// and images, which the URL's length says nothing about.

const model = {
  id: 'm',
  kind: 'chat',
  upstream: 'u',
  upstream_model: 'um',
  owned_by: 'o',
  tools: true,
  max_output_tokens: 1_000,
  image_input_tokens: 48_200,
  price_per_million_input_tokens_micros: 150_000,
  price_per_million_output_tokens_micros: 600_000,
  audio_as_tokens: false,
} satisfies ChatModel;

describe('the input tokens a chat call reserves', () => {
  it('counts ASCII at 4 characters a token, and other characters (CJK, emoji) at 1.5 tokens each', () => {
    assert.equal(estimateTextTokens('a'.repeat(400)), 100);
    assert.equal(estimateTextTokens('漢'.repeat(400)), 600);
    // An emoji is two UTF-16 units: one reads as ASCII.
    assert.equal(estimateTextTokens('🙂'.repeat(100)), 175);
    assert.equal(estimateTextTokens(`${'a'.repeat(400)}${'漢'.repeat(100)}`), 250);
  });

  it('counts every field the provider reads, not only the messages', () => {
    const schema = { type: 'object', properties: Object.fromEntries(Array.from({ length: 50 }, (_, index) => [`field_${index}`, { type: 'string', description: 'x'.repeat(100) }])) };
    const bare = upstreamChatRequest(model, { model: 'm', messages: [{ role: 'user', content: 'hi' }] } as never).promptTokens;
    const withSchema = upstreamChatRequest(model, { model: 'm', messages: [{ role: 'user', content: 'hi' }], response_format: { type: 'json_schema', json_schema: { name: 's', schema } } } as never).promptTokens;
    assert.ok(withSchema - bare >= JSON.stringify(schema).length / 4, `${bare} then ${withSchema}`);
  });

  it("counts each image as the model's image_input_tokens, whatever its URL's length", () => {
    const withImage = (url: string) =>
      upstreamChatRequest(model, { model: 'm', messages: [{ role: 'user', content: [{ type: 'text', text: 'what is this?' }, { type: 'image_url', image_url: { url } }] }] } as never).promptTokens;
    const short = withImage('https://example.com/a.png');
    const inline = withImage(`data:image/png;base64,${'A'.repeat(400_000)}`);
    assert.ok(short >= 48_200 && short < 48_300, String(short));
    assert.ok(Math.abs(inline - short) <= 1, `a data URL of 400 KB counts as the image it is: ${inline} against ${short}`);
  });
});

describe("a chat call's price", () => {
  it('is rounded up to a whole micro-dollar once, over the whole call, and exact for large counts', () => {
    // 2 × 0.15 + 8 × 0.60 = 5.1 micro-dollars: 6 charged, where pricing each token alone would
    // round up ten times.
    assert.equal(chatPriceMicros(model, { inputTokens: 2, outputTokens: 8 }), 6);
    assert.equal(chatPriceMicros(model, { inputTokens: 1_000_000, outputTokens: 1_000_000 }), 750_000, 'a whole price is not rounded');
    assert.equal(chatPriceMicros(model, { inputTokens: 0, outputTokens: 0 }), 0);
    assert.equal(chatPriceMicros(model, { inputTokens: -5, outputTokens: 1 }), 1, 'a negative count counts as none');
    // 6,000,000,000,504 exactly; a float product (past 2^53) reads 6,000,000,000,505.
    assert.equal(chatPriceMicros(model, { inputTokens: 0, outputTokens: 10_000_000_000_840 }), 6_000_000_000_504);
  });
});
