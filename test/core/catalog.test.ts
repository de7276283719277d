import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadCatalog, parseCatalog } from '../../core/catalog.ts';

describe('model catalog', () => {
  it('the local catalog routes the required ids to the simulator with their limits', () => {
    const catalog = loadCatalog('config/catalog.local.json', { SIMULATOR_URL: 'http://127.0.0.1:9999' });
    const seedance2 = catalog.find('seedance-2.0');
    assert.equal(seedance2?.kind, 'video');
    if (seedance2?.kind !== 'video') return;
    assert.deepEqual([seedance2.seconds[0], seedance2.seconds.at(-1)], [4, 15]);
    assert.deepEqual(seedance2.resolutions, ['480p', '720p', '1080p']);
    assert.equal(seedance2.audio, true);
    assert.deepEqual(seedance2.reference, { images: 9, videos: 3, audios: 3, total: 12, frames: true });
    const pro = catalog.find('seedance-1.0-pro');
    assert.ok(pro?.kind === 'video' && pro.audio === false && pro.reference.images === 0 && pro.reference.frames);
    assert.deepEqual(pro?.kind === 'video' && pro.seconds, [5, 10]);
    const sora = catalog.find('sora-2');
    assert.ok(sora?.kind === 'video' && catalog.upstream(sora.upstream).protocol === 'openai-videos');
    assert.deepEqual(sora?.kind === 'video' && sora.seconds, [4, 8, 12]);
    assert.equal(catalog.find('gpt-4o-mini')?.kind, 'chat');
    assert.equal(catalog.find('gpt-image-1')?.kind, 'image');
    assert.equal(catalog.upstream('simulator-openai').base_url, 'http://127.0.0.1:9999/v1');
  });

  it('interpolates ${VAR} and ${VAR:-default}, and names a missing variable', () => {
    const raw = {
      created: 1,
      upstreams: { up: { protocol: 'openai', base_url: '${BASE:-http://fallback.test}', api_key: '${UPSTREAM_KEY}' } },
      models: [],
    };
    assert.equal(parseCatalog(raw, { UPSTREAM_KEY: 'k' }).upstream('up').base_url, 'http://fallback.test');
    assert.throws(() => parseCatalog(raw, {}), /UPSTREAM_KEY/);
  });

  it('refuses a model that names an unknown upstream or a duplicate id', () => {
    const model = { id: 'm', kind: 'image', upstream: 'ghost', upstream_model: 'x', owned_by: 'y', price_per_image_micros: 1 };
    assert.throws(() => parseCatalog({ created: 1, upstreams: {}, models: [model] }, {}), /unknown upstream ghost/);
  });

  it('prices an image model by its flat price or by its quality and size table, and refuses one with neither', () => {
    const upstreams = { up: { protocol: 'openai', base_url: 'http://127.0.0.1:9', api_key: 'k' } };
    const image = { id: 'img', kind: 'image', upstream: 'up', upstream_model: 'x', owned_by: 'y' };
    const byTable = parseCatalog({ created: 1, upstreams, models: [{ ...image, prices_per_image_micros: { 'low 1024x1024': 11_000 } }] }, {}).find('img');
    assert.deepEqual(byTable?.kind === 'image' && byTable.prices_per_image_micros, { 'low 1024x1024': 11_000 });
    assert.equal(parseCatalog({ created: 1, upstreams, models: [{ ...image, price_per_image_micros: 40_000 }] }, {}).find('img')?.kind, 'image');
    assert.throws(() => parseCatalog({ created: 1, upstreams, models: [image] }, {}), /image model img has no price/);
    assert.throws(() => parseCatalog({ created: 1, upstreams, models: [{ ...image, prices_per_image_micros: {} }] }, {}), /must price at least one/);
  });
});
