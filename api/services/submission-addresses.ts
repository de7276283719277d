import { GatewayError } from '../../core/errors.ts';
import { isResolvableName, type HostCheckLog, type HostNameCheck, type NamedHost } from '../../core/host-names.ts';
import { refusedOnSight, type Allowlist } from '../../core/outbound-guard.ts';
import type { SubmissionInput } from '../../core/video-validation.ts';

// The addresses a video submission gives for others to call: its callback (the worker POSTs the
// task there) and its reference media (the vendor fetches them). An internal one is refused at
// submission, as ARCHITECTURE's outbound invariant asks, rather than accepted and then never
// delivered, or fetched by a vendor from inside the operator's network.

/** Why a submission's callback or reference media may not be used: a 400 when one's host is an
 * internal address the allowlist does not admit, written as one (or a localhost name) or
 * resolving to one; a 503 when a name could not be resolved (core/host-names.ts). The worker
 * calls the callback, and checks its address again on connecting; the vendor fetches the
 * reference media, and a vendor inside the operator's network (a self-hosted model server)
 * must not be sent to its neighbours either. Null when all may be used. */
export async function refusedAddressIn(body: SubmissionInput, allowlist: Allowlist, hostNames: HostNameCheck, log: HostCheckLog, requestId: string): Promise<GatewayError | null> {
  const names: NamedHost[] = [];
  const callbackUrl = body.metadata?.callback_url;
  if (callbackUrl) {
    const url = new URL(callbackUrl);
    const uncallable = refusedOnSight(url, allowlist);
    if (uncallable) return new GatewayError('invalid_request', `metadata.callback_url: ${uncallable.whatItIs}, which the gateway does not call; give an address it can reach.`, 'metadata.callback_url');
    if (isResolvableName(url.hostname)) names.push({ hostname: url.hostname, param: 'metadata.callback_url' });
  }
  for (const [index, entry] of (body.metadata?.content ?? []).entries()) {
    const raw = entry[entry.type]?.url;
    if (!raw) continue;
    const url = new URL(raw);
    const param = `metadata.content.${index}.${entry.type}.url`;
    const unfetchable = refusedOnSight(url, allowlist);
    if (unfetchable) return new GatewayError('invalid_request', `${param}: ${unfetchable.whatItIs}, which the gateway does not send a vendor to; give an address on the public internet.`, param);
    if (isResolvableName(url.hostname)) names.push({ hostname: url.hostname, param });
  }
  const fetcher = (param: string) => (param === 'metadata.callback_url' ? 'its callbacks' : 'a vendor');
  return hostNames.refusalError(names, fetcher, log, { reqId: requestId });
}
