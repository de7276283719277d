import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { projectRoot } from '../../scripts/lib/engines.ts';
import { adminHeaders, createAccount, createKey, TEST_ADMIN_TOKEN } from '../helpers/app.ts';
import { startVideoStack, type VideoStack } from '../helpers/video-stack.ts';

// Schemathesis against the whole running stack (api, worker, simulator, FerretDB, Temporal):
// it reads /openapi.json, generates requests from it (valid ones and deliberately broken ones),
// follows the document's links (submit a task, then poll and download it; create an account,
// then key it and revoke the key) and checks every answer against the document: no 5xx, no
// status the document does not list, every body and content type as declared, broken input
// refused, valid input accepted, 405 for undeclared methods, 401 without credentials.

const SCHEMATHESIS = path.join(projectRoot, '.tools/venv/bin/schemathesis');
const CONFIG = path.join(projectRoot, 'test/contract/schemathesis.toml');
const SEED = 20261122;
// Per operation and phase; with 16 operations and the stateful phase this generates about
// 1,600 test cases in about 70 s here.
const MAX_EXAMPLES = 25;

interface RunReport {
  exit_code: number;
  complete: boolean;
  test_cases: { generated: number; with_failures: number; errored: number };
  failures: Array<{ code: string; title: string; count: number; operations: string[] }>;
  errors: unknown[];
  valid_rates: Record<string, Record<string, { accepted: number }>>;
}

function runSchemathesis(args: string[], env: NodeJS.ProcessEnv, cwd: string): Promise<{ code: number; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(SCHEMATHESIS, args, { cwd, env: { ...process.env, ...env } });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code: code ?? 1, output }));
  });
}

// About 70 s on an idle machine; a run beside other work (load 10 to 13 on 2 cores) took over
// 300 s, so the limit only catches a run that hangs.
describe('the OpenAPI contract, fuzzed by Schemathesis', { timeout: 900_000 }, () => {
  let stack: VideoStack;
  let workDir: string;
  before(async () => {
    // No outbound allowlist for the worker: fuzzed callback URLs must never reach this machine's
    // services. The api admits every literal IPv4 address: the document's pattern cannot say
    // which ones the operator's allowlist refuses at submission (its description does), so the
    // fuzzer's valid callbacks on 10.x or 127.x would read as valid input refused. That refusal
    // is tested in test/api/video-validation.test.ts; here the worker refuses them at delivery.
    // Its generated requests carry wrong admin tokens by the hundred: past the usual 20, every
    // admin operation would answer 429 and hide the paths behind it.
    stack = await startVideoStack('schemathesis', { outboundAllowlist: '', apiOutboundAllowlist: '0.0.0.0/0', adminTokenGuesses: { windowMs: 600_000, failures: 1_000_000 } });
    workDir = mkdtempSync(path.join(tmpdir(), 'framegate-schemathesis-'));
  });
  after(async () => {
    await stack.close();
    rmSync(workDir, { recursive: true, force: true });
  });

  it('finds no server error, no schema violation and no other failure in 1,000+ generated requests', async () => {
    // Enough money for every valid submission the run makes, and limits it will not reach:
    // refusals for balance or rate would only hide the paths behind them.
    const account = await createAccount(stack.app, { name: 'schemathesis', balance_usd: 1_000_000 });
    const key = await createKey(stack.app, account.id, { name: 'schemathesis' });
    const limits = await stack.app.inject({
      method: 'PUT',
      url: `/admin/keys/${key.id}/rate-limits`,
      headers: adminHeaders,
      payload: { requests_per_minute: 1_000_000, tokens_per_minute: 1_000_000_000 },
    });
    assert.equal(limits.statusCode, 200, limits.body);

    const reportPath = path.join(workDir, 'report.json');
    const { code, output } = await runSchemathesis(
      [
        '--config-file', CONFIG,
        'run', `${stack.baseUrl}/openapi.json`,
        // Every check: schemathesis.toml turns them all on, so that one can be turned off for
        // one operation there (`--checks all` would overrule it).
        '--seed', String(SEED),
        '--max-examples', String(MAX_EXAMPLES),
        // A 302 to a clip is checked as the gateway's own answer, not followed to the vendor.
        '--max-redirects', '0',
        '--request-timeout', '30',
        // Examples found in earlier runs would make a run depend on the one before it.
        '--generation-database', 'none',
        '--no-color',
        '--report', 'json', '--report-json-path', reportPath,
      ],
      { FRAMEGATE_FUZZ_API_KEY: key.key, FRAMEGATE_FUZZ_ADMIN_TOKEN: TEST_ADMIN_TOKEN },
      workDir,
    );
    const report = JSON.parse(readFileSync(reportPath, 'utf8')) as RunReport;
    const summary = `seed ${SEED}, ${report.test_cases.generated} test cases\n${output.slice(-6_000)}`;

    assert.equal(report.complete, true, summary);
    assert.ok(report.test_cases.generated >= 1_000, `only ${report.test_cases.generated} test cases were generated`);
    const codes = report.failures.map((failure) => failure.code);
    assert.deepEqual(codes.filter((failureCode) => failureCode === 'ST101' || failureCode === 'ST102'), [], `server errors:\n${summary}`);
    assert.deepEqual(codes.filter((failureCode) => failureCode === 'ST108'), [], `responses that break their schema:\n${summary}`);
    assert.deepEqual(report.failures, [], summary);
    assert.deepEqual(report.errors, [], summary);
    assert.equal(code, 0, summary);

    // The run reached the real work, not only refusals: valid bodies were accepted on every
    // endpoint that starts something (tasks on the worker, calls to the simulated upstreams).
    for (const operation of ['POST /v1/video/generations', 'POST /v1/chat/completions', 'POST /v1/images/generations', 'POST /admin/accounts']) {
      const accepted = Object.values(report.valid_rates[operation] ?? {}).reduce((sum, phase) => sum + phase.accepted, 0);
      assert.ok(accepted >= 10, `${operation}: only ${accepted} valid requests were accepted`);
    }
    console.log(`[schemathesis] seed ${SEED}: ${report.test_cases.generated} test cases, no failures`);
  });
});
