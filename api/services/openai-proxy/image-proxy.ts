import type { Catalog } from '../../../core/catalog.ts';
import { imagePriceMicros } from '../../../core/chat-pricing.ts';
import { newId } from '../../../core/ids.ts';
import { resolveModel } from '../../../core/model-access.ts';
import type { ImageGenerationRequest } from '../../routes/images/schemas.ts';
import type { Principal } from '../../plugins/api-key-auth.ts';
import { Charge, type BillingStores } from './billing.ts';
import type { CallContext } from './chat-proxy.ts';
import type { OpenAiUpstreams } from './upstream-client.ts';
import { malformedUpstreamAnswer, upstreamRefusal } from './upstream-errors.ts';

// POST /v1/images/generations against an OpenAI-compatible upstream, billed per image: hold
// n × the image price, capture the price of the images that actually came back.

export interface ImageProxyOptions {
  catalog: Catalog;
  upstreams: OpenAiUpstreams;
  billing: BillingStores;
}

export class ImageProxy {
  constructor(private readonly options: ImageProxyOptions) {}

  /** The upstream's JSON text (created, data[] with url or b64_json). */
  async generate(principal: Principal, body: ImageGenerationRequest, context: CallContext): Promise<string> {
    const model = resolveModel(this.options.catalog, principal, body.model, 'image');
    const asked = body.n ?? 1;
    const reference = newId('req');
    const charge = await Charge.hold(this.options.billing, { principal, reference, modelId: model.id, kind: 'image' }, imagePriceMicros(model, asked), context.log);
    let text: string;
    let answer: unknown;
    try {
      const response = await this.options.upstreams.postJson(model.upstream, '/images/generations', { ...body, model: model.upstream_model }, { signal: context.signal, accept: 'application/json' });
      if (response.statusCode < 200 || response.statusCode >= 300) throw await upstreamRefusal(response);
      text = await response.body.text();
      try {
        answer = JSON.parse(text);
      } catch {
        throw malformedUpstreamAnswer('image response');
      }
    } catch (error) {
      await charge.release();
      throw error;
    }
    const data = (answer as { data?: unknown } | null)?.data;
    if (!Array.isArray(data) || data.length === 0) {
      await charge.release();
      throw malformedUpstreamAnswer('image response (no images)');
    }
    const images = Math.min(data.length, asked);
    await charge.capture(imagePriceMicros(model, images), { images }, { allowOverage: false });
    return text;
  }
}
