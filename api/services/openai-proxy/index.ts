import type { Catalog } from '../../../core/catalog.ts';
import { PendingSettlements, type BillingStores } from './billing.ts';
import { ChatProxy } from './chat-proxy.ts';
import { ImageProxy } from './image-proxy.ts';
import { OpenAiUpstreams, type UpstreamClientOptions } from './upstream-client.ts';

export { ChatProxy } from './chat-proxy.ts';
export { ImageProxy } from './image-proxy.ts';

export interface OpenAiProxies {
  chat: ChatProxy;
  images: ImageProxy;
  /** Waits for settlements still running, then closes the upstream pools; safe to call twice. */
  close(): Promise<void>;
}

/** The chat and image proxies over one set of keep-alive pools, one pool per upstream. */
export function createOpenAiProxies(options: { catalog: Catalog; billing: BillingStores; upstream?: UpstreamClientOptions }): OpenAiProxies {
  const upstreams = new OpenAiUpstreams(options.catalog, options.upstream);
  const settlements = new PendingSettlements();
  const dependencies = { catalog: options.catalog, upstreams, billing: options.billing };
  return {
    chat: new ChatProxy({ ...dependencies, settlements }),
    images: new ImageProxy(dependencies),
    async close() {
      await settlements.drain();
      await upstreams.close();
    },
  };
}
