import type { Catalog } from '../../../core/catalog.ts';
import type { AccountBudgets } from '../billing/account-budgets.ts';
import type { RateLimiter } from '../rate-limits/rate-limiter.ts';
import { CallsInFlight } from './calls-in-flight.ts';
import { ChatProxy } from './chat-proxy.ts';
import { ImageProxy } from './image-proxy.ts';
import { OpenAiUpstreams, type UpstreamClientOptions } from './upstream-client.ts';

export { ChatProxy } from './chat-proxy.ts';
export { ImageProxy } from './image-proxy.ts';

export interface OpenAiProxies {
  chat: ChatProxy;
  images: ImageProxy;
  /** The calls being served, for a shutdown to interrupt (calls-in-flight.ts). */
  calls: CallsInFlight;
  /** Closes the upstream pools; safe to call twice. */
  close(): Promise<void>;
}

/** The chat and image proxies over one set of keep-alive pools, one pool per upstream. */
export function createOpenAiProxies(options: { catalog: Catalog; budgets: AccountBudgets; limiter?: RateLimiter; upstream?: UpstreamClientOptions }): OpenAiProxies {
  const upstreams = new OpenAiUpstreams(options.catalog, options.upstream);
  const dependencies = { catalog: options.catalog, upstreams, budgets: options.budgets };
  const calls = new CallsInFlight();
  return {
    calls,
    chat: new ChatProxy({ ...dependencies, ...(options.limiter ? { limiter: options.limiter } : {}) }),
    images: new ImageProxy({ ...dependencies, calls }),
    async close() {
      await upstreams.close();
    },
  };
}
