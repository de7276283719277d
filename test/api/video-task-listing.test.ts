import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { TaskStore } from '../../store/tasks.ts';
import { bearer, createAccount, createKey, startTestApp, type TestApp } from '../helpers/app.ts';
import { taskDocument } from '../helpers/console-fixtures.ts';

describe('GET /v1/video/generations lists the account\'s tasks', () => {
  let harness: TestApp;
  let firstKey: string;
  let secondKey: string;
  let foreignTaskId: string;
  /** Oldest first, as submitted. */
  const submitted: string[] = [];
  /** Tasks of the other accounts tests make, for the cleanup. */
  const elsewhere: string[] = [];

  const submit = async (key: string) => {
    const response = await harness.app.inject({ method: 'POST', url: '/v1/video/generations', headers: bearer(key), payload: { model: 'sora-2', prompt: 'a lighthouse' } });
    assert.equal(response.statusCode, 200, response.body);
    return response.json().task_id as string;
  };
  const list = (key: string, query = '') => harness.app.inject({ method: 'GET', url: `/v1/video/generations${query}`, headers: bearer(key) });

  before(async () => {
    harness = await startTestApp('video-task-listing');
    const account = await createAccount(harness.app, { name: 'lister', balance_usd: 100 });
    firstKey = (await createKey(harness.app, account.id)).key;
    secondKey = (await createKey(harness.app, account.id, { name: 'second' })).key;
    // Two keys of one account, submitting in turns.
    for (let index = 0; index < 5; index += 1) submitted.push(await submit(index % 2 === 0 ? firstKey : secondKey));
    const other = await createAccount(harness.app, { name: 'other', balance_usd: 100 });
    foreignTaskId = await submit((await createKey(harness.app, other.id)).key);
  });
  after(async () => {
    // No worker runs these tasks here; stop their workflows to keep the server tidy.
    for (const taskId of [...submitted, ...elsewhere, foreignTaskId]) await harness.temporal.client.workflow.getHandle(taskId).terminate('test cleanup');
    await harness.close();
  });

  it('pages through every task of the account, newest first, with either key, and no other account\'s', async () => {
    const seen: string[] = [];
    let cursor = '';
    for (const [size, more] of [[2, true], [2, true], [2, false]] as const) {
      const page = await list(seen.length % 4 === 0 ? firstKey : secondKey, `?limit=${size}${cursor}`);
      assert.equal(page.statusCode, 200, page.body);
      const body = page.json();
      assert.equal(body.object, 'list');
      assert.equal(body.has_more, more);
      assert.equal(body.first_id, body.data[0].task_id);
      assert.equal(body.last_id, body.data.at(-1).task_id);
      for (const task of body.data) {
        assert.deepEqual([task.object, task.status, task.model, task.format], ['video.generation', 'submitted', 'sora-2', 'mp4']);
        seen.push(task.task_id);
      }
      cursor = `&after=${body.last_id}`;
    }
    assert.deepEqual(seen, [...submitted].reverse());
  });

  it("shows a key restricted to some models the tasks it submitted and those of its models, not the account's others", async () => {
    const account = await createAccount(harness.app, { name: 'restricted reader', balance_usd: 100 });
    const everything = (await createKey(harness.app, account.id, { name: 'everything' })).key;
    const seedanceOnly = await createKey(harness.app, account.id, { name: 'seedance only', models: ['seedance-2.0'] });
    const chatOnly = (await createKey(harness.app, account.id, { name: 'chat only', models: ['gpt-4o-mini'] })).key;
    const bySubmit = async (key: string, model: string) => {
      const response = await harness.app.inject({ method: 'POST', url: '/v1/video/generations', headers: bearer(key), payload: { model, prompt: 'a harbour' } });
      assert.equal(response.statusCode, 200, response.body);
      elsewhere.push(response.json().task_id);
      return response.json().task_id as string;
    };
    const soraOfOther = await bySubmit(everything, 'sora-2');
    const seedanceOfOther = await bySubmit(everything, 'seedance-2.0');
    const ownSeedance = await bySubmit(seedanceOnly.key, 'seedance-2.0');
    // Its models narrowed after it submitted: the key still reads its own task.
    assert.equal((await harness.app.inject({ method: 'PUT', url: `/admin/keys/${seedanceOnly.id}/models`, headers: { authorization: `Bearer ${harness.config.ADMIN_TOKEN}` }, payload: { models: ['gpt-4o-mini'] } })).statusCode, 200);
    const read = (key: string, taskId: string, path = '') => harness.app.inject({ method: 'GET', url: `/v1/video/generations/${taskId}${path}`, headers: bearer(key) });
    assert.equal((await read(seedanceOnly.key, ownSeedance)).statusCode, 200, 'its own task, whatever its models became');
    const refused = await read(seedanceOnly.key, seedanceOfOther);
    assert.deepEqual([refused.statusCode, refused.json().error.type, refused.json().error.code, refused.json().error.param], [403, 'permission_error', 'model_not_allowed', 'task_id']);
    assert.match(refused.json().error.message, /may not use the model 'seedance-2\.0': it reads the tasks it submitted/);
    assert.equal((await read(chatOnly, soraOfOther, '/content')).statusCode, 403, 'nor its clip');
    assert.equal((await read(everything, ownSeedance)).statusCode, 200, 'an unrestricted key reads every task of its account');
    const listed = async (key: string) => ((await list(key, '?limit=100')).json().data as Array<{ task_id: string }>).map((task) => task.task_id);
    assert.deepEqual(await listed(seedanceOnly.key), [ownSeedance]);
    assert.deepEqual(await listed(chatOnly), []);
    assert.equal((await list(chatOnly, `?after=${soraOfOther}`)).statusCode, 404, 'a task it may not read is no cursor for it');
    assert.deepEqual(await listed(everything), [ownSeedance, seedanceOfOther, soraOfOther]);
    // Given seedance-2.0 again, the key reads the account's seedance tasks too.
    await harness.app.inject({ method: 'PUT', url: `/admin/keys/${seedanceOnly.id}/models`, headers: { authorization: `Bearer ${harness.config.ADMIN_TOKEN}` }, payload: { models: ['seedance-2.0'] } });
    assert.deepEqual(await listed(seedanceOnly.key), [ownSeedance, seedanceOfOther]);
    assert.equal((await read(seedanceOnly.key, seedanceOfOther)).statusCode, 200);
  });

  it('gives each task the JSON its own GET gives', async () => {
    const listed = (await list(firstKey, '?limit=1')).json().data[0];
    const read = await harness.app.inject({ method: 'GET', url: `/v1/video/generations/${listed.task_id}`, headers: bearer(firstKey) });
    assert.deepEqual(listed, read.json());
  });

  it('narrows to one state', async () => {
    await harness.database.db.collection('tasks').updateOne({ _id: submitted[1] as never }, { $set: { status: 'failed', error: { code: 'generation_failed', message: 'x' } } });
    const failed = (await list(firstKey, '?status=failed')).json();
    assert.deepEqual(failed.data.map((task: { task_id: string }) => task.task_id), [submitted[1]]);
    assert.equal(failed.has_more, false);
    const none = (await list(firstKey, '?status=succeeded')).json();
    assert.deepEqual([none.data, none.first_id, none.last_id, none.has_more], [[], null, null, false]);
  });

  it('pages through tasks created in the same millisecond one by one, in id order, none twice or missed', async () => {
    const account = await createAccount(harness.app, { name: 'same instant' });
    const key = (await createKey(harness.app, account.id)).key;
    const instant = new Date('2026-01-02T03:04:05.678Z');
    const ids = ['task_tie_b', 'task_tie_d', 'task_tie_a', 'task_tie_c'];
    const tasks = new TaskStore(harness.database.db);
    for (const id of ids) await tasks.insert(taskDocument({ _id: id, account_id: account.id, key_id: 'key_tie', created_at: instant, updated_at: instant }));
    const seen: string[] = [];
    let cursor = '';
    for (;;) {
      const page = (await list(key, `?limit=1${cursor}`)).json();
      seen.push(...page.data.map((task: { task_id: string }) => task.task_id));
      if (!page.has_more) break;
      cursor = `&after=${page.last_id}`;
    }
    // Newest first, then by id, the later id first.
    assert.deepEqual(seen, [...ids].sort().reverse());
  });

  it('reads an empty cursor as none, an empty limit as the default, and an empty state as every state', async () => {
    const first = (await list(firstKey, '?limit=2&after=')).json();
    assert.deepEqual(first.data.map((task: { task_id: string }) => task.task_id), [...submitted].reverse().slice(0, 2));
    const defaulted = await list(firstKey, '?limit=');
    assert.equal(defaulted.statusCode, 200, defaulted.body);
    assert.equal(defaulted.json().data.length, Math.min(20, submitted.length));
    const everyState = await list(firstKey, '?limit=2&status=');
    assert.equal(everyState.statusCode, 200, everyState.body);
    assert.deepEqual(everyState.json().data, first.data);
  });

  it('refuses a bad limit or state, or an unknown parameter, with a 400 naming it, and a cursor from another account with a 404', async () => {
    // A misspelt filter is named, not ignored (which listed every task).
    const misspelt = await list(firstKey, '?state=failed&limit=2');
    assert.equal(misspelt.statusCode, 400, misspelt.body);
    assert.equal(misspelt.json().error.message, "Unknown query parameter 'state': this endpoint does not take it.");
    const invalid = await list(firstKey, '?limit=0');
    assert.match(invalid.json().error.message, /^Invalid query parameter 'limit': /);
    for (const [query, param] of [['?state=failed', 'state'], ['?before=task_x&order=asc', 'before'], ['?limit=0', 'limit'], ['?limit=101', 'limit'], ['?limit=two', 'limit'], ['?limit=1.5', 'limit'], ['?limit=0x10', 'limit'], ['?limit=1e1', 'limit'], ['?limit=%2B5', 'limit'], ['?status=done', 'status']]) {
      const refused = await list(firstKey, query);
      assert.equal(refused.statusCode, 400, `${query}: ${refused.body}`);
      assert.equal(refused.json().error.param, param, query);
    }
    // A parameter given twice is named in words, not in the validation library's.
    for (const [query, param] of [['?after=task_a&after=task_b', 'after'], ['?status=failed&status=running', 'status'], ['?limit=5&limit=5', 'limit']]) {
      const twice = await list(firstKey, query);
      assert.equal(twice.statusCode, 400, query);
      assert.deepEqual([twice.json().error.param, twice.json().error.message], [param, `Invalid query parameter '${param}': must be given once`], query);
    }
    const foreign = await list(firstKey, `?after=${foreignTaskId}`);
    assert.equal(foreign.statusCode, 404);
    assert.deepEqual([foreign.json().error.code, foreign.json().error.param], ['task_not_found', 'after']);
    assert.equal((await list(firstKey, `?after=${'x'.repeat(500)}`)).statusCode, 404);
  });
});
