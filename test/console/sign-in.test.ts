import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { buildApp } from '../../api/app.ts';
import { loadCatalog } from '../../core/catalog.ts';
import { ConsoleSessionStore } from '../../store/console-sessions.ts';
import { adminHeaders, startTestApp, type TestApp } from '../helpers/app.ts';
import { ConsoleClient, createAccountWithSignIn, visibleText } from '../helpers/console-client.ts';
import { uniqueName } from '../helpers/engines.ts';

// Signing in and out of the web console, CSRF refusals and session expiry, through Fastify
// inject against the real store.

const PASSWORD = 'correct horse battery staple';

describe('console sign-in', () => {
  let harness: TestApp;
  let email: string;
  let accountId: string;
  before(async () => {
    harness = await startTestApp('console_sign_in');
    email = `${uniqueName('holder')}@example.com`;
    accountId = (await createAccountWithSignIn(harness.app, { name: 'Acme <Films>', balance_usd: 12.5, console_email: email, console_password: PASSWORD })).id;
  });
  after(() => harness.close());

  it('sends a signed-out visitor to the sign-in page, which works without a session', async () => {
    const browser = new ConsoleClient(harness.app);
    for (const page of ['/console', '/console/keys', '/console/usage', '/console/webhooks', '/console/password']) {
      const response = await browser.get(page);
      assert.equal(response.statusCode, 303, page);
      // Back to the page asked for once signed in (the console root is no page of its own).
      assert.equal(response.headers.location, page === '/console' ? '/console/sign-in' : `/console/sign-in?next=${encodeURIComponent(page)}`, page);
    }
    const signIn = await browser.get('/console/sign-in');
    assert.equal(signIn.statusCode, 200);
    assert.match(signIn.headers['content-type'] as string, /^text\/html/);
    assert.match(signIn.body, /<form method="post" action="\/console\/sign-in">/);
    // An icon of its own, so browsers do not ask for /favicon.ico (a 404 on every page).
    assert.match(signIn.body, /<link rel="icon" href="data:,">/);
    assert.match(signIn.headers['content-security-policy'] as string, /script-src 'self'/);
    assert.equal(signIn.headers['cache-control'], 'no-store');
  });

  it('signs in with the right password: an HttpOnly, SameSite session cookie, the balance on the page, the name escaped', async () => {
    const browser = new ConsoleClient(harness.app);
    const response = await browser.signIn(email.toUpperCase(), PASSWORD);
    assert.equal(response.statusCode, 303);
    assert.equal(response.headers.location, '/console/keys');
    const sessionCookie = response.cookies.find((cookie) => cookie.name === 'fg_console_session');
    assert.ok(sessionCookie, 'a session cookie is set');
    assert.equal(sessionCookie.httpOnly, true);
    assert.equal(sessionCookie.sameSite, 'Lax');
    assert.equal(sessionCookie.path, '/console');
    // The browser keeps the cookie a week past the session, so an expired one can be told apart
    // from none (test/console/browser-session-expiry.test.ts); the store ends the session.
    assert.equal(sessionCookie.maxAge, harness.config.CONSOLE_SESSION_TTL_SECONDS + 7 * 86_400);

    // The store keeps only a hash of the token: the cookie value is not a session id.
    const stored = await harness.database.db.collection('console_sessions').findOne({ _id: createHash('sha256').update(sessionCookie.value).digest('hex') as never });
    assert.equal(stored?.account_id, accountId);
    assert.equal(await harness.database.db.collection('console_sessions').countDocuments({ _id: sessionCookie.value as never }), 0);

    const keys = await browser.get('/console/keys');
    assert.equal(keys.statusCode, 200);
    assert.match(visibleText(keys.body), /Acme <Films> · balance \$12\.50/);
    assert.ok(keys.body.includes('Acme &lt;Films&gt;'), 'the account name is escaped');
    assert.ok(!keys.body.includes('<Films>'));
  });

  it('refuses a wrong password and an unknown email with the same answer (401), and sets no session', async () => {
    for (const [who, password] of [[email, 'not the password at all'], [`nobody-${email}`, PASSWORD]] as const) {
      const browser = new ConsoleClient(harness.app);
      const response = await browser.signIn(who, password);
      assert.equal(response.statusCode, 401, who);
      assert.match(visibleText(response.body), /The email or password is not right\./);
      assert.ok(!response.cookies.some((cookie) => cookie.name === 'fg_console_session'));
      assert.ok(!response.body.includes(password), 'the password is never echoed');
      assert.equal((await browser.get('/console/keys')).statusCode, 303);
    }
  });

  it('refuses sign-ins for a while after repeated failures, without locking the owner out from elsewhere', async () => {
    const guessed = `${uniqueName('guessed')}@example.com`;
    await createAccountWithSignIn(harness.app, { name: 'Guessed', balance_usd: 1, console_email: guessed, console_password: PASSWORD });
    const attacker = new ConsoleClient(harness.app, '203.0.113.7');
    for (let guess = 0; guess < 5; guess++) assert.equal((await attacker.signIn(guessed, `wrong guess number ${guess}`)).statusCode, 401);
    // The sixth try is refused before its password is even looked at, the right one included.
    const refused = await attacker.signIn(guessed, PASSWORD);
    assert.equal(refused.statusCode, 429);
    assert.match(visibleText(refused.body), /Too many failed sign-ins\. Try again in 15 minutes\./);
    const retryAfter = Number(refused.headers['retry-after']);
    assert.ok(retryAfter > 14 * 60 && retryAfter <= 15 * 60, `Retry-After ${retryAfter}`);
    assert.ok(!refused.cookies.some((cookie) => cookie.name === 'fg_console_session'));
    // The owner, from another address, still gets in.
    const owner = new ConsoleClient(harness.app, '198.51.100.20');
    assert.equal((await owner.signIn(guessed, PASSWORD)).statusCode, 303);
    // Guesses sent all at once are counted before their passwords are hashed: at most five go
    // through (all may be refused: each counts the others it finds recorded).
    const burst = new ConsoleClient(harness.app, '203.0.113.8');
    const statuses = await Promise.all(Array.from({ length: 12 }, (_, index) => burst.signIn(guessed, `simultaneous guess ${index}`).then((answer) => answer.statusCode)));
    const [wrong, refusedAtOnce] = [statuses.filter((status) => status === 401).length, statuses.filter((status) => status === 429).length];
    assert.ok(wrong <= 5 && wrong + refusedAtOnce === 12, statuses.join(' '));
    // Spraying one password over many emails from one address stops after 20 failures.
    const sprayer = new ConsoleClient(harness.app, '203.0.113.99');
    for (let index = 0; index < 20; index++) assert.equal((await sprayer.signIn(`nobody-${index}-${guessed}`, 'password123456')).statusCode, 401);
    assert.equal((await sprayer.signIn(`nobody-else-${guessed}`, 'password123456')).statusCode, 429);
    // The operator form counts its own failures the same way.
    const operatorGuesser = new ConsoleClient(harness.app, '203.0.113.50');
    for (let guess = 0; guess < 5; guess++) assert.equal((await operatorGuesser.signInAsOperator(`not-the-token-${guess}-xxxxxxxx`)).statusCode, 401);
    assert.equal((await operatorGuesser.signInAsOperator()).statusCode, 429);
    assert.equal((await new ConsoleClient(harness.app, '198.51.100.21').signInAsOperator()).statusCode, 303);
  });

  it('behind a proxy named in TRUST_PROXY, counts failures per forwarded address, not per proxy', async () => {
    // Every visitor reaches the api from the proxy's address (127.0.0.1 here): counted under it,
    // one visitor's guesses would lock everyone out, the operator included.
    const proxied = await startTestApp('console_behind_proxy', { TRUST_PROXY: 'loopback' });
    try {
      const holder = `${uniqueName('proxied')}@example.com`;
      await createAccountWithSignIn(proxied.app, { name: 'Behind a proxy', balance_usd: 1, console_email: holder, console_password: PASSWORD });
      const sprayer = new ConsoleClient(proxied.app, '127.0.0.1', { 'x-forwarded-for': '203.0.113.99' });
      for (let index = 0; index < 20; index++) assert.equal((await sprayer.signIn(`nobody-${index}-${holder}`, 'password123456')).statusCode, 401);
      assert.equal((await sprayer.signIn(holder, PASSWORD)).statusCode, 429, 'the sprayer\'s own address is refused');
      assert.equal((await new ConsoleClient(proxied.app, '127.0.0.1', { 'x-forwarded-for': '198.51.100.20' }).signIn(holder, PASSWORD)).statusCode, 303);
      assert.equal((await new ConsoleClient(proxied.app, '127.0.0.1', { 'x-forwarded-for': '198.51.100.21' }).signInAsOperator()).statusCode, 303);
    } finally {
      await proxied.close();
    }
  });

  it('refuses forms without the CSRF token, with a wrong one, or without the CSRF cookie (403, an HTML page)', async () => {
    const browser = new ConsoleClient(harness.app);
    await browser.get('/console/sign-in');
    const missing = await browser.post('/console/sign-in', { email, password: PASSWORD }, { csrf: false });
    assert.equal(missing.statusCode, 403);
    assert.match(missing.headers['content-type'] as string, /^text\/html/);
    assert.match(visibleText(missing.body), /This form has expired/);
    const forged = await browser.post('/console/sign-in', { email, password: PASSWORD }, { csrf: 'forged-token' });
    assert.equal(forged.statusCode, 403);
    assert.ok(!forged.cookies.some((cookie) => cookie.name === 'fg_console_session'), 'no session for a refused form');

    const token = await browser.csrfToken('/console/sign-in');
    const stranger = new ConsoleClient(harness.app); // has no CSRF cookie
    const withoutCookie = await stranger.post('/console/sign-in', { email, password: PASSWORD }, { csrf: token });
    assert.equal(withoutCookie.statusCode, 403);

    // Signed in, a state-changing form without its token still changes nothing.
    await browser.signIn(email, PASSWORD);
    const keysBefore = await harness.database.db.collection('api_keys').countDocuments({ account_id: accountId });
    const createKey = await browser.post('/console/keys', { name: 'sneaky' }, { csrf: false });
    assert.equal(createKey.statusCode, 403);
    assert.equal(await harness.database.db.collection('api_keys').countDocuments({ account_id: accountId }), keysBefore);
  });

  it('refuses a form rendered before the browser signed in again, as another account or the same one', async () => {
    const otherEmail = `${uniqueName('other-holder')}@example.com`;
    const otherAccountId = (await createAccountWithSignIn(harness.app, { name: 'Gamma', console_email: otherEmail, console_password: PASSWORD })).id;
    const keysOf = (account: string) => harness.database.db.collection('api_keys').countDocuments({ account_id: account });
    const secretOf = async (account: string) => (await harness.app.inject({ url: `/admin/accounts/${account}`, headers: adminHeaders })).json().webhook_secret;
    const before = { keys: await keysOf(otherAccountId), secret: await secretOf(otherAccountId), ownKeys: await keysOf(accountId) };

    // One browser: a tab left on the first account's pages, the other tab signs in elsewhere.
    const browser = new ConsoleClient(harness.app);
    await browser.signIn(email, PASSWORD);
    const keysForm = await browser.csrfToken('/console/keys');
    const webhooksForm = await browser.csrfToken('/console/webhooks');
    await browser.post('/console/sign-out', {});
    assert.equal((await browser.signIn(otherEmail, PASSWORD)).statusCode, 303);

    const created = await browser.post('/console/keys', { name: 'meant for the first account' }, { csrf: keysForm });
    assert.equal(created.statusCode, 403);
    assert.match(visibleText(created.body), /This form has expired/);
    assert.equal((await browser.post('/console/webhooks/rotate', {}, { csrf: webhooksForm })).statusCode, 403);
    assert.deepEqual({ keys: await keysOf(otherAccountId), secret: await secretOf(otherAccountId), ownKeys: await keysOf(accountId) }, before);

    // Signing in again as the same account also retires the forms of the session before.
    const stale = await browser.csrfToken('/console/keys');
    await browser.signIn(otherEmail, PASSWORD);
    assert.equal((await browser.post('/console/keys', { name: 'stale' }, { csrf: stale })).statusCode, 403);
    // A page rendered now works.
    assert.equal((await browser.post('/console/keys', { name: 'fresh' }, { csrf: await browser.csrfToken('/console/keys') })).statusCode, 303);
    assert.equal(await keysOf(otherAccountId), before.keys + 1);
  });

  it('signs out: the session is deleted and its cookie no longer opens pages', async () => {
    const browser = new ConsoleClient(harness.app);
    await browser.signIn(email, PASSWORD);
    const token = browser.cookies.get('fg_console_session')!;
    // A typed /console/sign-out offers the form; the GET itself signs nobody out.
    const offered = await browser.get('/console/sign-out');
    assert.equal(offered.statusCode, 200);
    assert.match(offered.body, /<form method="post" action="\/console\/sign-out">/);
    assert.match(offered.body, /href="\/console\/keys">Stay signed in/);
    assert.equal((await browser.get('/console/keys')).statusCode, 200);
    const signOut = await browser.post('/console/sign-out', {});
    assert.equal(signOut.statusCode, 303);
    assert.equal(signOut.headers.location, '/console/sign-in?signed_out=1');
    assert.equal(browser.cookies.get('fg_console_session'), undefined, 'the cookie is cleared');
    assert.equal(await harness.database.db.collection('console_sessions').countDocuments({ _id: createHash('sha256').update(token).digest('hex') as never }), 0);
    const replayed = await harness.app.inject({ method: 'GET', url: '/console/keys', headers: { cookie: `fg_console_session=${token}` } });
    assert.equal(replayed.statusCode, 303);
    // A cookie whose session is gone reads as one that ended (a browser keeps it past its session).
    assert.equal(replayed.headers.location, '/console/sign-in?expired=1&next=%2Fconsole%2Fkeys');
    // So it does at the console's front door and on the sign-in page itself, which drop it.
    const front = await harness.app.inject({ method: 'GET', url: '/console/', headers: { cookie: `fg_console_session=${token}` } });
    assert.equal(front.headers.location, '/console/sign-in?expired=1');
    const signInPage = await harness.app.inject({ method: 'GET', url: '/console/sign-in', headers: { cookie: `fg_console_session=${token}` } });
    assert.equal(signInPage.statusCode, 200);
    assert.match(visibleText(signInPage.body), /Your session expired\. Sign in again\./);
    for (const answer of [front, signInPage]) {
      assert.match(String(answer.headers['set-cookie']), /fg_console_session=;[^,]*Max-Age=0/i, 'the ended session\'s cookie is dropped');
    }
    assert.equal((await browser.get('/console/sign-out')).headers.location, '/console/sign-in', 'signed out, it goes to the sign-in page');
  });

  it('signs operators in with the admin token only, and keeps the two areas apart', async () => {
    const operator = new ConsoleClient(harness.app);
    const wrong = await operator.signInAsOperator('not-the-admin-token-at-all');
    assert.equal(wrong.statusCode, 401);
    assert.match(visibleText(wrong.body), /That is not the admin token/);
    const right = await operator.signInAsOperator();
    assert.equal(right.statusCode, 303);
    assert.equal(right.headers.location, '/console/operator');
    assert.equal((await operator.get('/console/operator')).statusCode, 200);
    assert.equal((await operator.get('/console/keys')).headers.location, '/console/operator', 'an operator has no account pages');

    const holder = new ConsoleClient(harness.app);
    await holder.signIn(email, PASSWORD);
    const forbidden = await holder.get('/console/operator');
    assert.equal(forbidden.statusCode, 303);
    assert.equal(forbidden.headers.location, '/console/keys', 'an account holder never sees operator pages');
    assert.equal((await holder.get(`/console/operator/accounts/${accountId}`)).headers.location, '/console/keys');
  });

  it('ends operator sessions opened with an earlier ADMIN_TOKEN once the token is changed', async () => {
    const operator = new ConsoleClient(harness.app);
    await operator.signInAsOperator();
    const cookie = `fg_console_session=${operator.cookies.get('fg_console_session')}`;
    // The same store behind an api restarted with a new token.
    const catalog = loadCatalog(harness.config.CATALOG_FILE, { SIMULATOR_URL: harness.config.SIMULATOR_URL });
    const restarted = await buildApp({ config: { ...harness.config, ADMIN_TOKEN: 'a-brand-new-admin-token-0123456789' }, catalog, database: harness.database, temporal: harness.temporal, logger: false });
    try {
      const answer = await restarted.inject({ method: 'GET', url: '/console/operator', headers: { cookie } });
      assert.equal(answer.statusCode, 303);
      assert.equal(answer.headers.location, '/console/operator/sign-in?expired=1&next=%2Fconsole%2Foperator');
      const again = await harness.app.inject({ method: 'GET', url: '/console/operator', headers: { cookie } });
      assert.equal(again.headers.location, '/console/operator/sign-in?expired=1&next=%2Fconsole%2Foperator', 'and the session is gone');
    } finally {
      await restarted.close();
    }
  });

  it('stores nothing a copy of the session store could test admin-token guesses against', async () => {
    const sessions = harness.database.db.collection('console_sessions');
    const before = new Set((await sessions.find({ kind: 'operator' }).toArray()).map((session) => session._id));
    for (let index = 0; index < 2; index++) assert.equal((await new ConsoleClient(harness.app).signInAsOperator()).statusCode, 303);
    const opened = (await sessions.find({ kind: 'operator' }).toArray()).filter((session) => !before.has(session._id));
    assert.equal(opened.length, 2);
    // Keyed by each session's own token (the store keeps only its hash): no digest of the token.
    const digest = createHash('sha256').update(`framegate console session:${harness.config.ADMIN_TOKEN}`).digest('hex').slice(0, 32);
    assert.ok(opened.every((session) => session.bound_to !== digest));
    assert.notEqual(opened[0]!.bound_to, opened[1]!.bound_to);
  });

  it('answers unknown console pages with an HTML 404, while the API keeps its JSON errors', async () => {
    const page = await new ConsoleClient(harness.app).get('/console/nope');
    assert.equal(page.statusCode, 404);
    assert.match(page.headers['content-type'] as string, /^text\/html/);
    const api = await harness.app.inject({ method: 'GET', url: '/v1/nope' });
    assert.equal(api.json().error.type, 'not_found_error');
    const urlencodedToAdmin = await harness.app.inject({ method: 'POST', url: '/admin/accounts', headers: { ...adminHeaders, 'content-type': 'application/x-www-form-urlencoded' }, payload: 'name=x' });
    assert.equal(urlencodedToAdmin.statusCode, 415, 'form bodies are parsed only under /console');
  });
  it('returns to the page that found the session gone, never to one off the console', async () => {
    // A review signed in again from an expired session and landed on the keys page, whatever it had open.
    const browser = new ConsoleClient(harness.app, '198.51.100.61');
    const asked = '/console/usage?from=2026-01-01&to=2026-01-31';
    const away = await browser.get(asked);
    assert.equal(away.headers.location, `/console/sign-in?next=${encodeURIComponent(asked)}`);
    const form = await browser.get(away.headers.location as string);
    assert.match(form.body, new RegExp(`<input type="hidden" name="next" value="${asked.replaceAll('?', '\\?').replaceAll('&', '&amp;')}">`));
    const signedIn = await browser.post('/console/sign-in', { email, password: PASSWORD, next: asked });
    assert.deepEqual([signedIn.statusCode, signedIn.headers.location], [303, asked]);
    for (const next of ['//evil.example/console/keys', 'https://evil.example/', '/console//evil.example', '/console\\evil', '/console/sign-out', '/consolex', '/admin/accounts', '/console/keys\r\nSet-Cookie: x=1', '/console/../admin', '/console/%2e%2e/admin/accounts', '/console/keys/../../admin', '/console/./sign-out', '/console/sign%2Din', '/console/%73ign-out']) {
      const other = new ConsoleClient(harness.app, '198.51.100.62');
      await other.get(`/console/sign-in?next=${encodeURIComponent(next)}`);
      assert.ok(!other.lastPage.includes('name="next"'), `${next}: not kept in the form`);
      const answer = await other.post('/console/sign-in', { email, password: PASSWORD, next });
      assert.deepEqual([answer.statusCode, answer.headers.location], [303, '/console/keys'], next);
    }
  });
});

describe('console session expiry', () => {
  let harness: TestApp;
  before(async () => {
    harness = await startTestApp('console_expiry', { CONSOLE_SESSION_TTL_SECONDS: '1' });
  });
  after(() => harness.close());

  it('ends a session after CONSOLE_SESSION_TTL_SECONDS: back to sign-in, and the session is deleted', async () => {
    const email = `${uniqueName('expiring')}@example.com`;
    await createAccountWithSignIn(harness.app, { name: 'Short-lived', console_email: email, console_password: PASSWORD });
    const browser = new ConsoleClient(harness.app);
    const signIn = await browser.signIn(email, PASSWORD);
    assert.equal(signIn.cookies.find((cookie) => cookie.name === 'fg_console_session')?.maxAge, 1 + 7 * 86_400);
    assert.equal((await browser.get('/console/keys')).statusCode, 200);
    const sessions = harness.database.db.collection('console_sessions');
    assert.equal(await sessions.countDocuments({}), 1);

    await new Promise((resolve) => setTimeout(resolve, 1_300));
    const expired = await browser.get('/console/keys');
    assert.equal(expired.statusCode, 303);
    assert.equal(expired.headers.location, '/console/sign-in?expired=1&next=%2Fconsole%2Fkeys');
    assert.equal(await sessions.countDocuments({}), 0, 'the expired session is deleted when seen');
    const notice = await browser.get('/console/sign-in?expired=1');
    assert.match(visibleText(notice.body), /Your session expired/);
  });

  it('sweeps expired sessions nobody comes back for', async () => {
    const sessions = harness.database.db.collection('console_sessions');
    const store = new ConsoleSessionStore(harness.database.db);
    const past = new Date(Date.now() - 10_000);
    await store.create({ kind: 'account', accountId: 'acct_gone', signIn: 'gone@example.com', boundTo: () => 'x', ttlSeconds: 1, now: past });
    const live = await store.create({ kind: 'operator', accountId: null, signIn: null, boundTo: () => 'y', ttlSeconds: 3600 });
    assert.equal(await store.deleteExpired(), 1);
    assert.deepEqual((await sessions.find({}).toArray()).map((session) => session._id), [live.session._id]);
  });
});
