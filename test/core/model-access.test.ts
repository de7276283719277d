import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadCatalog } from '../../core/catalog.ts';
import { GatewayError } from '../../core/errors.ts';
import { resolveModel } from '../../core/model-access.ts';

// The refusals of a model a request names, in the spec's order and in readable sentences.

describe('resolveModel', () => {
  const catalog = loadCatalog('config/catalog.local.json', { SIMULATOR_URL: 'http://127.0.0.1:9999' });
  const everything = { models: null };

  const refusal = (run: () => unknown): GatewayError => {
    try {
      run();
    } catch (error) {
      assert.ok(error instanceof GatewayError);
      return error;
    }
    assert.fail('no refusal');
  };

  it('names the kinds with their articles when a model is used on the wrong endpoint', () => {
    const chatForImages = refusal(() => resolveModel(catalog, everything, 'gpt-4o-mini', 'image'));
    assert.equal(chatForImages.message, "The model 'gpt-4o-mini' is a chat model; this endpoint needs an image model.");
    const imageForChat = refusal(() => resolveModel(catalog, everything, 'gpt-image-1', 'chat'));
    assert.equal(imageForChat.message, "The model 'gpt-image-1' is an image model; this endpoint needs a chat model.");
    assert.equal(imageForChat.status, 400);
  });

  it('quotes at most 100 characters of an unknown or forbidden model id', () => {
    const long = 'x'.repeat(100_000);
    const unknown = refusal(() => resolveModel(catalog, everything, long, 'chat'));
    assert.equal(unknown.status, 404);
    assert.ok(unknown.message.length < 250, `${unknown.message.length} characters`);
    assert.ok(unknown.message.includes(`'${'x'.repeat(100)}…'`));
    const typo = refusal(() => resolveModel(catalog, everything, 'gpt-4o-mimi', 'chat'));
    assert.match(typo.message, /^The model 'gpt-4o-mimi' does not exist\./);
    const forbidden = refusal(() => resolveModel(catalog, { models: ['gpt-image-1'] }, 'gpt-4o-mini', 'chat'));
    assert.equal(forbidden.status, 403);
    assert.equal(forbidden.message, "This API key may not use the model 'gpt-4o-mini'.");
  });
});
