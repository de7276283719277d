import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { hashApiKey } from '../../core/api-keys.ts';
import { keyIdForHash } from '../../store/api-keys.ts';
import { IDEMPOTENCY_TTL_MS, IdempotencyStore } from '../../store/idempotency.ts';
import { TaskStore } from '../../store/tasks.ts';
import { adminHeaders, bearer, createKey } from '../helpers/app.ts';
import { startOpenAiStack, type SimulatorStack } from '../helpers/openai-stack.ts';
import { waitUntil } from '../helpers/wait-until.ts';

// Idempotency-Key on video submissions and image generations: one task and one charge for any
// number of retries; 422 for another body under the same key; 409 while the first runs; scoped
// per API key; refusals not kept; records expire after 24 hours; an abandoned first attempt is
// recovered from the task it created.

const video = { model: 'seedance-2.0', prompt: 'a paper boat on a pond', seconds: '5' };

describe('Idempotency-Key', () => {
  let stack: SimulatorStack;
  let records: IdempotencyStore;
  before(async () => {
    stack = await startOpenAiStack('idempotency');
    records = new IdempotencyStore(stack.database.db);
  });
  after(() => stack.close());

  function submit(key: string, idempotencyKey: string | undefined, body: object = video) {
    const headers = { ...bearer(key), ...(idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey }) };
    return stack.app.inject({ method: 'POST', url: '/v1/video/generations', headers, payload: body });
  }

  /** The price of `video` in USD, as the model's catalog entry sets it. */
  async function submitPrice(): Promise<number> {
    const probe = await stack.newCaller('price probe', 0.000001);
    const refused = await submit(probe.key, undefined);
    const price = /costs \$(\d+\.\d+)/.exec(refused.json().error.message)?.[1];
    assert.ok(price, refused.body);
    return Number(price);
  }

  async function taskCount(accountId: string): Promise<number> {
    return stack.database.db.collection('tasks').countDocuments({ account_id: accountId });
  }

  it('answers a retried submission with the first task, creating and charging one', async () => {
    const caller = await stack.newCaller('retry');
    const first = await submit(caller.key, 'order-1');
    assert.equal(first.statusCode, 200, first.body);
    assert.equal(first.headers['idempotent-replayed'], undefined);
    const again = await submit(caller.key, 'order-1', { prompt: video.prompt, seconds: '5', model: 'seedance-2.0' });
    assert.equal(again.statusCode, 200);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.equal(again.json().task_id, first.json().task_id);
    assert.equal(await taskCount(caller.accountId), 1);
    const account = await stack.account(caller.accountId);
    assert.equal(10_000_000 - account.balance_micros, account.held_micros, 'one hold');

    const without = [await submit(caller.key, undefined), await submit(caller.key, undefined)];
    assert.notEqual(without[0]!.json().task_id, without[1]!.json().task_id, 'no header, no deduplication');
    assert.equal(await taskCount(caller.accountId), 3);
  });

  it('refuses the same key with another body (422) and a duplicate in flight (409)', async () => {
    const caller = await stack.newCaller('conflicts');
    assert.equal((await submit(caller.key, 'k')).statusCode, 200);
    const other = await submit(caller.key, 'k', { ...video, prompt: 'another boat' });
    assert.equal(other.statusCode, 422);
    assert.equal(other.json().error.code, 'idempotency_mismatch');
    assert.match(other.json().error.message, /already used with a different request body/);
    // The same key on another endpoint says so, rather than blame the body.
    const images = await stack.app.inject({ method: 'POST', url: '/v1/images/generations', headers: { ...bearer(caller.key), 'idempotency-key': 'k' }, payload: { model: 'gpt-image-1', prompt: 'a boat' } });
    assert.equal(images.statusCode, 422, images.body);
    assert.equal(images.json().error.code, 'idempotency_mismatch');
    assert.match(images.json().error.message, /^This Idempotency-Key was already used on POST \/v1\/video\/generations, another endpoint\./);

    const racing = await Promise.all(Array.from({ length: 6 }, () => submit(caller.key, 'race')));
    const statuses = racing.map((response) => response.statusCode).sort();
    const winners = racing.filter((response) => response.statusCode === 200);
    assert.ok(winners.length >= 1, `statuses ${statuses}`);
    assert.ok(statuses.every((status) => status === 200 || status === 409), `statuses ${statuses}`);
    assert.equal(new Set(winners.map((response) => response.json().task_id)).size, 1, 'every 200 names the same task');
    for (const conflict of racing.filter((response) => response.statusCode === 409)) assert.equal(conflict.json().error.code, 'conflict');
    assert.equal(await taskCount(caller.accountId), 2);
  });

  it('scopes keys per API key and keeps no refusal', async () => {
    const caller = await stack.newCaller('scoped', 0.01);
    const secondKey = (await createKey(stack.app, caller.accountId, { name: 'second' })).key;
    // Too poor for a 5 s task: refused, and the refusal is not what a retry gets.
    const poor = await submit(caller.key, 'shared-key');
    assert.equal(poor.statusCode, 403);
    await stack.app.inject({ method: 'POST', url: `/admin/accounts/${caller.accountId}/credits`, headers: adminHeaders, payload: { amount_usd: 10 } });
    const retried = await submit(caller.key, 'shared-key');
    assert.equal(retried.statusCode, 200, retried.body);
    const otherKey = await submit(secondKey, 'shared-key');
    assert.equal(otherKey.statusCode, 200);
    assert.notEqual(otherKey.json().task_id, retried.json().task_id);
    assert.equal(await taskCount(caller.accountId), 2);
  });

  it('refuses a malformed key with 400 naming the header', async () => {
    const caller = await stack.newCaller('malformed');
    for (const bad of ['', 'has space', 'x'.repeat(256)]) {
      const response = await submit(caller.key, bad);
      assert.equal(response.statusCode, 400, JSON.stringify(bad));
      assert.equal(response.json().error.param, 'Idempotency-Key');
    }
    assert.equal(await taskCount(caller.accountId), 0);
  });

  it('forgets a key after 24 hours', async () => {
    const caller = await stack.newCaller('expiry');
    const first = await submit(caller.key, 'old');
    const past = new Date(Date.now() - IDEMPOTENCY_TTL_MS - 1_000);
    await records.collection.updateMany({}, { $set: { created_at: past, expires_at: new Date(past.getTime() + IDEMPOTENCY_TTL_MS) } });
    const later = await submit(caller.key, 'old');
    assert.equal(later.statusCode, 200);
    assert.notEqual(later.json().task_id, first.json().task_id);
    assert.ok((await records.deleteExpired(new Date())) >= 1, 'the sweeper removes expired records');
  });

  it('recovers an abandoned first attempt from the task it created, or runs it again', async () => {
    const caller = await stack.newCaller('abandoned');
    const first = await submit(caller.key, 'crashed');
    // As if the process died after creating the task, before keeping the answer.
    const longAgo = new Date(Date.now() - 60_000);
    await records.collection.updateMany({ state: 'completed' }, { $set: { state: 'in_flight', created_at: longAgo, refreshed_at: longAgo }, $unset: { body: '', status_code: '' } });
    const retry = await submit(caller.key, 'crashed');
    assert.equal(retry.statusCode, 200);
    assert.equal(retry.headers['idempotent-replayed'], 'true');
    assert.equal(retry.json().task_id, first.json().task_id);
    assert.equal(await taskCount(caller.accountId), 1);

    // Died before creating the task: a retry runs it, under the task id the record names.
    const young = await submit(caller.key, 'died-early');
    const recordId = (await records.collection.findOne({ task_id: young.json().task_id }))!._id;
    await stack.database.db.collection('tasks').deleteOne({ _id: young.json().task_id });
    await records.collection.updateOne({ _id: recordId }, { $set: { state: 'in_flight', created_at: longAgo, refreshed_at: longAgo } });
    const rerun = await submit(caller.key, 'died-early');
    assert.equal(rerun.statusCode, 200, rerun.body);
    assert.equal(rerun.headers['idempotent-replayed'], undefined);
    assert.equal(rerun.json().task_id, young.json().task_id);
  });

  /** A first attempt under `idempotencyKey` that died after storing its task, before holding
   * its price or starting its workflow: the record names a stored task nothing else has. */
  async function diedAfterStoring(caller: { key: string }, idempotencyKey: string, storedPriceMicros?: number): Promise<string> {
    const first = await submit(caller.key, idempotencyKey);
    assert.equal(first.statusCode, 200, first.body);
    const tasks = stack.database.db.collection<{ _id: string }>('tasks');
    const stored = (await tasks.findOne({ _id: first.json().task_id }))!;
    const strandedId = `${first.json().task_id}x`;
    const { workflow_input: input, ...rest } = stored as unknown as { workflow_input: Record<string, unknown> } & Record<string, unknown>;
    const price = storedPriceMicros === undefined ? {} : { price_micros: storedPriceMicros };
    const held = storedPriceMicros === undefined ? {} : { holdMicros: storedPriceMicros };
    await tasks.insertOne({ ...rest, ...price, _id: strandedId, status: 'submitted', workflow_started: false, workflow_input: { ...input, ...held, taskId: strandedId } } as never);
    const longAgo = new Date(Date.now() - 60_000);
    await records.collection.updateOne({ task_id: first.json().task_id }, { $set: { task_id: strandedId, state: 'in_flight', created_at: longAgo, refreshed_at: longAgo }, $unset: { body: '', status_code: '' } });
    return strandedId;
  }

  it('goes on with a first attempt that died after storing its task: the retry holds the price and starts the workflow at once', async () => {
    const caller = await stack.newCaller('stored-only');
    // Stored at a price the catalog no longer has: the submission goes on at that one.
    const strandedId = await diedAfterStoring(caller, 'stored-only', 123_456);
    const retry = await submit(caller.key, 'stored-only');
    assert.equal(retry.statusCode, 200, retry.body);
    assert.equal(retry.json().task_id, strandedId);
    assert.equal(retry.headers['idempotent-replayed'], undefined, 'run on, not replayed');
    const described = await stack.temporal.client.workflow.getHandle(strandedId).describe();
    assert.equal(described.workflowId, strandedId);
    assert.equal(await new TaskStore(stack.database.db).workflowStarted(strandedId), true);
    // Both tasks are held: the first attempt's original one, and the resumed one at its stored price.
    const hold = await stack.database.db.collection<{ reference: string; operation: string; amount_micros: number }>('ledger').findOne({ reference: strandedId, operation: 'hold' });
    assert.equal(hold?.amount_micros, 123_456);
    const account = (await stack.app.inject({ method: 'GET', url: `/admin/accounts/${caller.accountId}`, headers: adminHeaders })).json();
    assert.ok(Math.abs(account.held_usd - ((await submitPrice()) + 0.123456)) < 1e-9, JSON.stringify(account));
    const again = await submit(caller.key, 'stored-only');
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.equal(again.json().task_id, strandedId);
  });

  it('refuses with 403 the retry of a task stored but never held, once the balance no longer covers it', async () => {
    // Enough for one task: the original submission's hold takes it all.
    const price = await submitPrice();
    const caller = await stack.newCaller('stored-poor', price);
    const strandedId = await diedAfterStoring(caller, 'stored-poor');
    const retry = await submit(caller.key, 'stored-poor');
    assert.equal(retry.statusCode, 403, retry.body);
    assert.equal(retry.json().error.code, 'insufficient_balance');
    await assert.rejects(stack.temporal.client.workflow.getHandle(strandedId).describe(), /not found/i);
    assert.equal(await stack.database.db.collection<{ _id: string }>('tasks').countDocuments({ _id: strandedId }), 0, 'the refused task is gone');
  });

  it("submits anew under a new task id when the first attempt's task was closed unbilled", async () => {
    const caller = await stack.newCaller('closed');
    const first = await submit(caller.key, 'closed-first');
    assert.equal(first.statusCode, 200, first.body);
    const closedId = first.json().task_id as string;
    // As after a 503 during a store outage: the submission's task was closed unbilled in the
    // background, and the record could not be released, so it stayed in flight.
    const tasks = stack.database.db.collection<{ _id: string }>('tasks');
    await tasks.updateOne({ _id: closedId }, { $set: { status: 'failed', error: { code: 'gateway_unavailable', message: 'The task could not be scheduled.' } } });
    const longAgo = new Date(Date.now() - 60_000);
    await records.collection.updateOne({ task_id: closedId }, { $set: { state: 'in_flight', created_at: longAgo, refreshed_at: longAgo }, $unset: { body: '', status_code: '' } });

    const retry = await submit(caller.key, 'closed-first');
    assert.equal(retry.statusCode, 200, retry.body);
    assert.equal(retry.headers['idempotent-replayed'], undefined, 'run again, not replayed');
    const freshId = retry.json().task_id as string;
    assert.notEqual(freshId, closedId);
    assert.equal((await tasks.findOne({ _id: closedId }) as { status?: string } | null)?.status, 'failed', 'the closed task stays closed');
    assert.ok(await tasks.findOne({ _id: freshId }), 'the new task is stored');
    assert.equal(await taskCount(caller.accountId), 2);
    // The record now leads further retries to the new task.
    const again = await submit(caller.key, 'closed-first');
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.equal(again.json().task_id, freshId);
  });

  /** Two base64 images of `prompt` under the Idempotency-Key. */
  const generateImages = (key: string, idempotencyKey: string, prompt: string) =>
    stack.app.inject({
      method: 'POST',
      url: '/v1/images/generations',
      headers: { ...bearer(key), 'idempotency-key': idempotencyKey },
      payload: { model: 'gpt-image-1', prompt, n: 2, response_format: 'b64_json' },
    });

  it('answers a retried image generation with the same images, billed once', async () => {
    const caller = await stack.newCaller('images');
    const generate = () => generateImages(caller.key, 'img-1', 'a lighthouse');
    const first = await generate();
    assert.equal(first.statusCode, 200, first.body);
    const again = await generate();
    assert.equal(again.statusCode, 200);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.equal(again.body, first.body);
    const account = await stack.settledAccount(caller.accountId);
    assert.equal(account.spent_micros, 80_000, 'two images, charged once');
  });

  it('answers a retried image generation larger than a store document with the same images, billed once', async () => {
    // Two images of 9 MiB each: about 24 MiB of base64, past the 16 MiB a document may hold.
    const caller = await stack.newCaller('large-images');
    const generate = () => generateImages(caller.key, 'img-large', 'a lighthouse [sim:image_kib=9216]');
    const first = await generate();
    assert.equal(first.statusCode, 200, first.body.slice(0, 500));
    assert.ok(first.body.length > 20 * 1024 * 1024, `${first.body.length} characters`);
    const again = await generate();
    assert.equal(again.statusCode, 200, again.body.slice(0, 500));
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.ok(again.body === first.body, 'the same answer, byte for byte');
    const record = await records.collection.findOne({ _id: new RegExp(`^${keyIdForHash(hashApiKey(caller.key))}:`) as never });
    assert.equal(record?.body, undefined);
    assert.ok((record?.body_pieces ?? 0) >= 3, `kept in ${record?.body_pieces} pieces`);
    const account = await stack.settledAccount(caller.accountId);
    assert.equal(account.spent_micros, 80_000, 'two images, charged once');
    // The pieces go with their record's time.
    await records.deleteExpired(new Date(Date.now() + 2 * IDEMPOTENCY_TTL_MS));
    assert.equal(await records.pieces.collection.countDocuments({ _id: new RegExp(`^${record!._id}:`) as never }), 0);
  });

  it("carries an image call its caller left to its end: billed once, and the retry gets that call's images", async () => {
    const caller = await stack.newCaller('image-left');
    const payload = JSON.stringify({ model: 'gpt-image-1', prompt: 'a lighthouse in fog [sim:delay_ms=1500]', n: 1, response_format: 'url' });
    const headers = { ...bearer(caller.key), 'content-type': 'application/json', 'idempotency-key': 'img-left' };
    const recordSuffix = `:${createHash('sha256').update('img-left').digest('hex')}`;
    const completed = async () => (await records.collection.find({ state: 'completed' }).toArray()).filter((record) => record._id.endsWith(recordSuffix)).length;
    const before = await stack.simulatorStats();
    const { hostname, port } = new URL(stack.baseUrl);
    const leaving = httpRequest({ host: hostname, port, method: 'POST', path: '/v1/images/generations', headers: { ...headers, 'content-length': Buffer.byteLength(payload) } });
    leaving.on('error', () => undefined);
    leaving.end(payload);
    // The request reached the provider, which makes (and bills) the image from there on.
    await waitUntil(async () => (await stack.simulatorStats()).image_requests === before.image_requests + 1);
    leaving.destroy();
    const retry = () => stack.app.inject({ method: 'POST', url: '/v1/images/generations', headers, payload });
    const meanwhile = await retry();
    assert.equal(meanwhile.statusCode, 409, meanwhile.body);
    assert.equal(meanwhile.headers['retry-after'], '1');
    await waitUntil(async () => (await completed()) === 1, 5_000);
    const retried = await retry();
    assert.equal(retried.statusCode, 200, retried.body);
    assert.equal(retried.headers['idempotent-replayed'], 'true');
    assert.match((retried.json() as { data: Array<{ url: string }> }).data[0]!.url, /\/media\/img_[0-9a-f]+\.png$/);
    const after = await stack.simulatorStats();
    assert.equal(after.image_requests, before.image_requests + 1, 'one image made, none for the retry');
    assert.equal(after.image_requests_left, before.image_requests_left, 'the gateway waited for the image');
    const account = await stack.settledAccount(caller.accountId);
    assert.equal(account.spent_micros, 40_000, 'the image billed once');
  });
});
