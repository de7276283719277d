import type { Catalog, ImageModel } from '../../../core/catalog.ts';
import { quotedId } from '../../../core/characters.ts';
import { imageUnitPriceMicros } from '../../../core/chat-pricing.ts';
import { GatewayError } from '../../../core/errors.ts';
import { countImageCharge } from '../../../core/metrics.ts';
import { resolveModel } from '../../../core/model-access.ts';
import { restoreUnsafeIntegers } from '../../../core/verbatim-integers.ts';
import type { ImageGenerationRequest } from '../../routes/images/schemas.ts';
import type { Principal } from '../../plugins/api-key-auth.ts';
import type { AccountBudgets } from '../billing/account-budgets.ts';
import type { CallContext } from './chat-proxy.ts';
import type { OpenAiUpstreams } from './upstream-client.ts';
import type { CallsInFlight } from './calls-in-flight.ts';
import { CarriedCall } from './carried-call.ts';
import { malformedUpstreamAnswer } from './upstream-errors.ts';

// POST /v1/images/generations against an OpenAI-compatible upstream, billed per image: reserve
// n × the image price from the account's spend lease, charge the images that actually came back.
// A model the catalog prices by quality and size serves only the combinations it has a price
// for: anything else would be billed at a price the provider does not charge.

export interface ImageProxyOptions {
  catalog: Catalog;
  upstreams: OpenAiUpstreams;
  budgets: AccountBudgets;
  /** Where a call its caller left is found by a shutdown (carried-call.ts). */
  calls?: CallsInFlight;
}

function isImage(entry: unknown): boolean {
  if (typeof entry !== 'object' || entry === null) return false;
  const { url, b64_json: base64 } = entry as { url?: unknown; b64_json?: unknown };
  return (typeof url === 'string' && url !== '') || (typeof base64 === 'string' && base64 !== '');
}

/** A 400 naming the field when the model makes only some sizes (or qualities) and not this one. */
function refuseUnmade(model: ImageModel, field: 'size' | 'quality', asked: unknown): void {
  const made = field === 'size' ? model.sizes : model.qualities;
  if (!made || asked === undefined || asked === null || made.includes(asked as string)) return;
  const shown = typeof asked === 'string' ? quotedId(asked) : typeof asked === 'object' ? 'an object' : `a ${typeof asked}`;
  throw new GatewayError('invalid_request', `The model '${model.id}' takes the ${field} ${made.map((value) => `'${value}'`).join(', ')}, not ${shown}.`, field);
}

export class ImageProxy {
  constructor(private readonly options: ImageProxyOptions) {}

  /** The upstream's JSON text (created, data[] with url or b64_json). */
  async generate(principal: Principal, body: ImageGenerationRequest, context: CallContext): Promise<string> {
    const model = resolveModel(this.options.catalog, principal, body.model, 'image');
    const asked = body.n ?? 1;
    const quality = typeof body.quality === 'string' ? body.quality : undefined;
    const size = body.size ?? undefined;
    refuseUnmade(model, 'size', size);
    refuseUnmade(model, 'quality', body.quality);
    const unitPrice = imageUnitPriceMicros(model, { quality, size });
    if (unitPrice === undefined) {
      const prices = model.prices_per_image_micros ?? {};
      const priced = Object.keys(prices).map((key) => `"${key}"`).join(', ');
      // The field at fault: the quality, unless it is priced at some size and the size is what
      // has no price with it.
      const chosenQuality = quality ?? model.default_quality;
      const qualityPriced = Object.keys(prices).some((key) => key.startsWith(`${chosenQuality} `));
      throw new GatewayError(
        'invalid_request',
        `The model '${model.id}' is priced for these quality and size pairs only: ${priced} (a request without quality or size means "${model.default_quality}" and "${model.default_size}").`,
        qualityPriced ? 'size' : 'quality',
      );
    }
    // A model priced by quality and size gets the pair it was priced at, defaults included:
    // left out, the provider would pick its own (gpt-image-1's auto may render at high).
    const upstreamBody = model.prices_per_image_micros ? { ...body, quality: quality ?? model.default_quality, size: size ?? model.default_size } : body;
    const reservation = await this.options.budgets.reserve(
      principal.accountId,
      unitPrice * asked,
      { keyId: principal.keyId, modelId: model.id, kind: 'image' },
      'or ask for fewer images (n)',
    );
    let text: string;
    let answer: unknown;
    // Once its request is out, the call runs to its end even if the caller leaves: the provider
    // bills the images anyway (carried-call.ts).
    const carried = new CarriedCall(context.signal, this.options.calls);
    try {
      ({ text, json: answer } = await this.options.upstreams.postForJson(model.upstream, '/images/generations', restoreUnsafeIntegers(JSON.stringify({ ...upstreamBody, model: model.upstream_model })), { signal: carried.signal, what: 'image response' }));
    } catch (error) {
      reservation.release();
      throw error;
    } finally {
      carried.done();
    }
    const listed = (answer as { data?: unknown } | null)?.data;
    // An image is an entry with its url or its base64: anything else in the list is dropped,
    // neither handed over nor charged.
    const data = Array.isArray(listed) ? listed.filter(isImage) : [];
    if (data.length === 0) {
      reservation.release();
      throw malformedUpstreamAnswer('image response (no images)');
    }
    const images = Math.min(data.length, asked);
    countImageCharge(model.id, reservation.charge(unitPrice * images, { images }, { allowOverage: false }));
    if (carried.abandoned) context.log.info({ model: model.id, images }, 'image call charged after its caller left: the provider made the images');
    // The caller gets what it asked for and pays for: an upstream's extra images are dropped.
    if (data.length !== (listed as unknown[]).length || data.length > asked) return JSON.stringify({ ...(answer as object), data: data.slice(0, asked) });
    return text;
  }
}
