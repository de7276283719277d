import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createTemporalHandle } from '../../core/temporal-client.ts';
import { testTemporalAddress } from '../helpers/engines.ts';

// /readyz asks Temporal about the api's namespace, not only whether the server answers: on a
// server without it, every video submission would fail while the probe said ready.

describe('the Temporal readiness check', () => {
  it('passes for a namespace the server has', async () => {
    const handle = createTemporalHandle({ address: testTemporalAddress(), namespace: 'default' });
    try {
      await handle.check();
    } finally {
      await handle.close();
    }
  });

  it('fails, naming TEMPORAL_NAMESPACE, for one it does not have', async () => {
    const handle = createTemporalHandle({ address: testTemporalAddress(), namespace: 'no-such-namespace' });
    try {
      await assert.rejects(handle.check(), new RegExp(`^Error: Temporal at ${testTemporalAddress().replaceAll('.', '\\.')} has no namespace 'no-such-namespace' \\(TEMPORAL_NAMESPACE\\)$`));
    } finally {
      await handle.close();
    }
  });
});
