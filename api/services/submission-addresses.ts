import { refusedOnSight, type Allowlist } from '../../core/outbound-guard.ts';
import type { SubmissionInput } from '../../core/video-validation.ts';

// The addresses a video submission gives for others to call: its callback (the worker POSTs the
// task there) and its reference media (the vendor fetches them). A literal internal one is
// refused at submission, as ARCHITECTURE's outbound invariant asks, rather than accepted and
// then never delivered, or fetched by a vendor from inside the operator's network.

/** The first caller-supplied URL of a submission whose host is a literal internal address (or a
 * localhost name) the allowlist does not admit, as a 400's message and field. The worker calls
 * the callback; the vendor fetches the reference media, and a vendor inside the operator's
 * network (a self-hosted model server) must not be sent to its neighbours either. Names pass
 * here: only a connection can tell where they lead. */
export function internalAddressIn(body: SubmissionInput, allowlist: Allowlist): { message: string; param: string } | null {
  const callbackUrl = body.metadata?.callback_url;
  const uncallable = callbackUrl ? refusedOnSight(new URL(callbackUrl), allowlist) : null;
  if (uncallable) return { message: `metadata.callback_url: ${uncallable.whatItIs}, which the gateway does not call; give an address it can reach.`, param: 'metadata.callback_url' };
  for (const [index, entry] of (body.metadata?.content ?? []).entries()) {
    const url = entry[entry.type]?.url;
    const unfetchable = url ? refusedOnSight(new URL(url), allowlist) : null;
    const param = `metadata.content.${index}.${entry.type}.url`;
    if (unfetchable) return { message: `${param}: ${unfetchable.whatItIs}, which the gateway does not send a vendor to; give an address on the public internet.`, param };
  }
  return null;
}
