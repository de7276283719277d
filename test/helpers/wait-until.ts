import assert from 'node:assert/strict';

/** Polls `condition` every 10 ms until it holds; fails the test after `timeoutMs`. */
export async function waitUntil(condition: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    assert.ok(Date.now() < deadline, 'timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
