import type { FastifyInstance } from 'fastify';
import { accountFrame, accountIdOf } from '../account-area.ts';
import { sendPage, type ConsoleContext } from '../context.ts';
import { webhooksPage } from '../views/webhooks.ts';

// The webhook signing secret: shown on demand, rotated with a grace period. Rotation answers
// with a redirect, so reloading the page afterwards cannot rotate a second time (which would
// push the secret receivers still use out of the grace period).

const NOTICES = {
  rotated: { kind: 'success' as const, text: 'New secret created. Show it below and update your receivers; the previous secret keeps signing until the grace period ends.' },
  retired: { kind: 'success' as const, text: 'Earlier secrets no longer sign: deliveries carry the current secret\'s signature only.' },
};

export async function webhookRoutes(app: FastifyInstance, { context }: { context: ConsoleContext }): Promise<void> {
  const graceSeconds = context.config.WEBHOOK_SECRET_GRACE_SECONDS;

  app.get('/webhooks', async (request, reply) => {
    const asked = (request.query as Record<string, unknown>).notice;
    const notice = asked === 'rotated' || asked === 'retired' ? NOTICES[asked] : null;
    return sendPage(reply, webhooksPage(accountFrame(request, reply, 'webhooks'), { revealed: false, graceSeconds, notice }));
  });

  app.post('/webhooks/reveal', async (request, reply) => {
    return sendPage(reply, webhooksPage(accountFrame(request, reply, 'webhooks'), { revealed: true, graceSeconds }));
  });

  app.post('/webhooks/rotate', async (request, reply) => {
    await context.accounts.rotateWebhookSecret(accountIdOf(request), graceSeconds);
    request.log.info({ account_id: accountIdOf(request), grace_seconds: graceSeconds }, 'webhook secret rotated in the console');
    return reply.redirect('/console/webhooks?notice=rotated', 303);
  });

  // For a secret that leaked: its grace ends now rather than when it was due.
  app.post('/webhooks/retire-earlier', async (request, reply) => {
    await context.accounts.retireEarlierWebhookSecrets(accountIdOf(request));
    request.log.info({ account_id: accountIdOf(request) }, 'earlier webhook secrets retired in the console');
    return reply.redirect('/console/webhooks?notice=retired', 303);
  });
}
