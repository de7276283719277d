import { UpstreamNotConfiguredError, type Catalog } from './catalog.ts';
import { createVideoVendor } from '../vendors/registry.ts';
import type { VideoVendor } from '../vendors/types.ts';

/** Resolves a catalog upstream name to its video adapter, one adapter per upstream. */
export function createVendorLookup(catalog: Catalog): (upstream: string) => VideoVendor {
  const adapters = new Map<string, VideoVendor>();
  return (name: string): VideoVendor => {
    const cached = adapters.get(name);
    if (cached) return cached;
    const upstream = catalog.upstream(name);
    if (upstream.protocol === 'openai') throw new UpstreamNotConfiguredError(`the upstream '${name}' is not a video vendor`);
    const adapter = createVideoVendor(upstream.protocol, { baseUrl: upstream.base_url, apiKey: upstream.api_key });
    adapters.set(name, adapter);
    return adapter;
  };
}
