import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { Catalog } from '../../../core/catalog.ts';
import { z } from 'zod';
import { GatewayError } from '../../../core/errors.ts';
import { quotedId } from '../../../core/characters.ts';
import { IDEMPOTENCY_KEY_PATTERN } from '../../plugins/idempotency.ts';
import type { AccountStore } from '../../../store/accounts.ts';
import type { ApiKeyStore } from '../../../store/api-keys.ts';
import { AUTHENTICATED_ERRORS, BODY_ERRORS, errorResponses } from '../../openapi/error-responses.ts';
import { adminTokenSecurity } from '../../openapi/security.ts';
import type { AccountOnboarding } from '../../services/account-onboarding.ts';
import { addCredits } from '../../services/credit-addition.ts';
import type { CreditDeductions } from '../../services/credit-deduction.ts';
import type { KeyCreation } from '../../services/key-creation.ts';
import { accountIdParams, accountList, accountListQuery, accountView, accountWithKeysView, addCreditsBody, createAccountBody, deductCreditsBody, createdKeyView, createKeyBodyFor, unknownModels } from './schemas.ts';
import { toAccountView, toKeyView } from './views.ts';
import { listPage } from '../list-query.ts';

export interface AdminRouteOptions {
  accounts: AccountStore;
  apiKeys: ApiKeyStore;
  catalog: Catalog;
  onboarding: AccountOnboarding;
  keyCreation: KeyCreation;
  deductions: CreditDeductions;
}

/** The headers of a route that takes an `Idempotency-Key`, which does what `effect` says. */
function idempotencyKeyHeaders(effect: string) {
  return z.looseObject({
    'idempotency-key': z.string().regex(IDEMPOTENCY_KEY_PATTERN, 'must be 1 to 255 printable ASCII characters').optional().describe(effect),
  });
}

const moneyMovementHeaders = idempotencyKeyHeaders('Makes a retry safe: the same key moves the money once; the same key with another amount is a 422.');
const accountCreationHeaders = idempotencyKeyHeaders('Makes a retry safe: the same key creates the account once, for good (it never expires); the same key with another name, opening balance or email is a 422.');
const keyCreationHeaders = idempotencyKeyHeaders('Makes a retry safe: the same key creates the API key once, and a retry within 24 hours gets its plaintext again; the same key with another name or other models is a 422.');

function accountNotFound(id: string): GatewayError {
  return new GatewayError('resource_not_found', `No account with id '${id}'.`);
}

export const adminRoutes: FastifyPluginAsyncZod<AdminRouteOptions> = async (app, { accounts, apiKeys, catalog, onboarding, keyCreation, deductions }) => {
  app.addHook('onRequest', app.requireAdmin);
  // Answers carry a key's plaintext (shown once) or an account's webhook secret: no cache, in
  // between or at the client, may keep them.
  app.addHook('onSend', async (_request, reply, payload) => {
    reply.header('cache-control', 'no-store');
    return payload;
  });
  // Declared where it is enforced: every route here wants the operator token.
  const documented = (operationId: string, summary: string) => ({ tags: ['admin'], operationId, summary, security: adminTokenSecurity });

  app.post(
    '/accounts',
    {
      schema: {
        ...documented('createAccount', 'Create an account'),
        description: 'With `Idempotency-Key`, a retry (after a timeout, say) answers the account the first request created, 201 with `idempotent-replayed: true`, and creates no other; the same key with another name, opening balance or email is a 422.',
        headers: accountCreationHeaders,
        body: createAccountBody,
        response: { 201: accountView, ...errorResponses(...BODY_ERRORS, 409, 422, ...AUTHENTICATED_ERRORS) },
      },
    },
    async (request, reply) => {
      const { console_email: email, console_password: password } = request.body;
      const idempotencyKey = request.headers['idempotency-key'];
      const { account } = await onboarding.createAccount({
        name: request.body.name,
        balanceMicros: request.body.balance_usd ?? 0,
        signIn: email !== undefined && password !== undefined ? { email, password } : undefined,
        ...(idempotencyKey === undefined ? {} : { idempotencyKey }),
      });
      if (account.replayed) reply.header('idempotent-replayed', 'true');
      return reply.status(201).send(toAccountView(await accounts.withAvailable(account)));
    },
  );

  app.get('/accounts', { schema: { ...documented('listAccounts', 'List accounts, newest first'), description: 'Page with `after` (the `last_id` of the page before) while `has_more` is true.', querystring: accountListQuery, response: { 200: accountList, ...errorResponses(400, 404, ...AUTHENTICATED_ERRORS) } } }, async (request) => {
    const { limit, after } = request.query;
    // No account has an id over 100 characters: such a cursor needs no read.
    const cursor = after === undefined ? undefined : after.length > 100 ? null : await accounts.findDocument(after);
    if (cursor === null) throw new GatewayError('resource_not_found', `No account with id ${quotedId(after!)} to list after.`, 'after');
    const page = await accounts.listPage({ limit, after: cursor });
    return listPage(page.accounts.map(toAccountView), page.accounts.map((account) => account._id), page.hasMore);
  });

  app.get('/accounts/:id', { schema: { ...documented('getAccount', 'Read an account and its keys'), params: accountIdParams, response: { 200: accountWithKeysView, ...errorResponses(400, 404, ...AUTHENTICATED_ERRORS) } } }, async (request) => {
    const account = await accounts.find(request.params.id);
    if (!account) throw accountNotFound(request.params.id);
    const keys = await apiKeys.listForAccount(account._id);
    return { ...toAccountView(await accounts.withAvailable(account)), keys: keys.map(toKeyView) };
  });

  /**
   * The ledger reference of a credit or deduction: under an Idempotency-Key, one per key and
   * account, so a script that retries a request that timed out moves the money once; without
   * one, a new reference each time. A key used before with another amount is a 422.
   */
  async function movementReference(headers: { 'idempotency-key'?: string }, accountId: string, operation: 'credit' | 'deduct', amountMicros: number): Promise<string | undefined> {
    const key = headers['idempotency-key'];
    if (key === undefined) return undefined;
    const reference = `admin:${accountId}:${key}`;
    const moved = await accounts.movedUnder(accountId, reference, operation);
    if (moved !== null && moved !== amountMicros) throw amountMismatch();
    return reference;
  }

  /** After the movement: two requests under one key at once both pass the check above, and the
   * ledger moves the money once, for the first. The other is told its amount was not moved. */
  async function confirmMovedOnce(accountId: string, reference: string | undefined, operation: 'credit' | 'deduct', amountMicros: number): Promise<void> {
    if (reference !== undefined && (await accounts.movedUnder(accountId, reference, operation)) !== amountMicros) throw amountMismatch();
  }

  const amountMismatch = () =>
    new GatewayError('idempotency_mismatch', 'This Idempotency-Key was already used with a different amount. Use a new key for a new request.', 'Idempotency-Key');

  app.post('/accounts/:id/credits', { schema: { ...documented('addCredits', 'Add credits to an account'), params: accountIdParams, headers: moneyMovementHeaders, body: addCreditsBody, response: { 200: accountView, ...errorResponses(...BODY_ERRORS, 404, 409, 422, ...AUTHENTICATED_ERRORS) } } }, async (request) => {
    const reference = await movementReference(request.headers, request.params.id, 'credit', request.body.amount_usd);
    const account = await addCredits(accounts, request.params.id, request.body.amount_usd, reference);
    if (!account) throw accountNotFound(request.params.id);
    await confirmMovedOnce(request.params.id, reference, 'credit', request.body.amount_usd);
    return toAccountView(await accounts.withAvailable(account));
  });

  app.post('/accounts/:id/deductions', { schema: { ...documented('deductCredits', 'Take credits back from an account (a mistaken credit, a refund paid elsewhere)'), params: accountIdParams, headers: moneyMovementHeaders, body: deductCreditsBody, response: { 200: accountView, ...errorResponses(...BODY_ERRORS, 404, 409, 422, ...AUTHENTICATED_ERRORS) } } }, async (request) => {
    const reference = await movementReference(request.headers, request.params.id, 'deduct', request.body.amount_usd);
    const account = await deductions.deduct(request.params.id, request.body.amount_usd, reference);
    if (!account) throw accountNotFound(request.params.id);
    await confirmMovedOnce(request.params.id, reference, 'deduct', request.body.amount_usd);
    return toAccountView(await accounts.withAvailable(account));
  });

  app.post(
    '/accounts/:id/keys',
    {
      schema: {
        ...documented('createKey', 'Create an API key (its plaintext is shown only here)'),
        description:
          'With `Idempotency-Key`, a retry within 24 hours (after a timeout, say) answers the key the first request created, plaintext included, 201 with `idempotent-replayed: true`, and creates no other; the same key with another name or other models is a 422. After 24 hours, once that key is revoked, or after ADMIN_TOKEN changed, a retry is a 409 naming the key, and nothing is made.',
        params: accountIdParams,
        headers: keyCreationHeaders,
        body: createKeyBodyFor(catalog),
        response: { 201: createdKeyView, ...errorResponses(...BODY_ERRORS, 404, 409, 422, ...AUTHENTICATED_ERRORS) },
      },
    },
    async (request, reply) => {
      const account = await accounts.find(request.params.id);
      if (!account) throw accountNotFound(request.params.id);
      const models = request.body.models ?? null;
      const refusal = unknownModels(catalog, models);
      if (refusal) throw refusal;
      const idempotencyKey = request.headers['idempotency-key'];
      const { key, plaintext, replayed } = await keyCreation.create({ accountId: account._id, name: request.body.name, models, ...(idempotencyKey === undefined ? {} : { idempotencyKey }) });
      if (replayed) reply.header('idempotent-replayed', 'true');
      return reply.status(201).send({
        id: key._id,
        key: plaintext,
        name: key.name,
        models: key.models,
        prefix: key.prefix,
        last4: key.last4,
        created_at: key.created_at.toISOString(),
      });
    },
  );
};
