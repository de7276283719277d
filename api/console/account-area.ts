import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Catalog } from '../../core/catalog.ts';
import type { ConsoleContext } from './context.ts';
import { keyRoutes } from './routes/keys.ts';
import { passwordRoutes } from './routes/password.ts';
import { usageRoutes } from './routes/usage.ts';
import { webhookRoutes } from './routes/webhooks.ts';
import { signInAddress } from './return-to.ts';
import { sessionBoundTo, sessionOrRedirect } from './sessions.ts';
import type { AccountSection, PageFrame } from './views/layout.ts';

// The account holder's pages. One guard in front of all of them: a valid account session whose
// sign-in still holds, and the account itself loaded fresh (its balance is on every page).

/** The price of the shortest clip at the cheapest resolution of the cheapest video model. */
function cheapestVideoMicros(catalog: Catalog): number | undefined {
  const prices = catalog.all().flatMap((model) => (model.kind === 'video' ? [Math.min(...model.seconds) * Math.min(...Object.values(model.price_per_second_micros))] : []));
  return prices.length > 0 ? Math.min(...prices) : undefined;
}

export async function accountArea(app: FastifyInstance, { context }: { context: ConsoleContext }): Promise<void> {
  app.decorateRequest('consoleAccount', null);
  const cheapestVideo = cheapestVideoMicros(context.catalog);
  app.decorateRequest('consoleCheapestVideoMicros', cheapestVideo);
  app.addHook('onRequest', async (request, reply) => {
    await context.sessions.load(request);
    const session = sessionOrRedirect(request, reply, 'account');
    if (!session) return reply;
    // The sign-in must still be what the session was opened with: a password changed since
    // (or a sign-in moved or removed) ends it.
    const credential = session.sign_in ? await context.credentials.find(session.sign_in) : null;
    const stillValid = credential && credential.account_id === session.account_id && sessionBoundTo(request, credential.password_hash);
    const account = stillValid ? await context.accounts.findWithLimits(credential.account_id) : null;
    if (!account) {
      await context.sessions.end(request, reply);
      return reply.redirect(signInAddress(request, '/console/sign-in', true), 303);
    }
    request.consoleAccount = account;
  });

  await app.register(keyRoutes, { context });
  await app.register(usageRoutes, { context });
  await app.register(webhookRoutes, { context });
  await app.register(passwordRoutes, { context });
}

/** The page frame of the signed-in holder; only inside the account area. */
export function accountFrame(request: FastifyRequest, reply: FastifyReply, section?: AccountSection): Extract<PageFrame, { area: 'account' }> {
  const account = request.consoleAccount;
  if (!account) throw new Error('accountFrame used outside the account area');
  return { area: 'account', csrfToken: reply.generateCsrf(), account, section, ...(request.consoleCheapestVideoMicros === undefined ? {} : { cheapestVideoMicros: request.consoleCheapestVideoMicros }) };
}

/** The signed-in holder's account id; only inside the account area. */
export function accountIdOf(request: FastifyRequest): string {
  const account = request.consoleAccount;
  if (!account) throw new Error('accountIdOf used outside the account area');
  return account._id;
}
