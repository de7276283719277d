import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { asEarlierTryInFlight, callerWording, IN_FLIGHT_CONFLICT_MS } from '../../activities/vendor.ts';
import { VendorRejectedError, VendorTransientError } from '../../vendors/types.ts';

// What a task's caller reads of a vendor's failure (the workflow puts it in the task's error):
// the vendor's words only when it refused the request itself; never the operator's key, the
// vendor's address or its account, which its words for other failures can carry.

describe('a vendor failure in the caller\'s words', () => {
  it('keeps the vendor\'s words for a refusal of the request itself', () => {
    for (const status of [400, 409, 413, 422]) {
      const message = `seedance answered ${status} InvalidParameter: ratio 9:21 is not supported`;
      assert.equal(callerWording(new VendorRejectedError(message, status, 'InvalidParameter')), message);
    }
  });

  it('gives only the status and code for the gateway\'s setup or the vendor\'s trouble', () => {
    const cases: Array<[VendorRejectedError | VendorTransientError, string]> = [
      [new VendorRejectedError('sora answered 401 invalid_api_key: Incorrect API key provided: sk-proj-AbC1****wxyz', 401, 'invalid_api_key'), 'it answered 401 invalid_api_key'],
      [new VendorRejectedError('sora answered 403: project proj_secret may not use sora-2', 403), 'it answered 403'],
      [new VendorRejectedError('seedance: GET task answered 404: no such task in account 2100453', 404), 'it answered 404'],
      [new VendorTransientError('sora answered 503: proxy 10.20.30.40:8443 failed for org-Operator123', 503), 'it answered 503'],
      [new VendorTransientError('seedance: POST /api/v3/contents/generations/tasks got no answer: ECONNREFUSED: connect ECONNREFUSED 10.0.0.7:443'), 'it did not answer'],
    ];
    for (const [error, words] of cases) assert.equal(callerWording(error), words, error.message);
  });

  it('reads a 409 as an earlier try still in progress only on a retry within the window', () => {
    const conflict = new VendorRejectedError('seedance answered 409 IdempotencyKeyInUse: in progress', 409, 'IdempotencyKeyInUse');
    const firstScheduled = Date.now() - 10_000;
    const retried = asEarlierTryInFlight(conflict, { attempt: 2, scheduledTimestampMs: firstScheduled });
    assert.ok(retried instanceof VendorTransientError);
    assert.equal(retried.status, 409);
    // The first try has no earlier request: its 409 is the vendor's word on the request.
    assert.equal(asEarlierTryInFlight(conflict, { attempt: 1, scheduledTimestampMs: firstScheduled }), conflict);
    // Past the window no earlier try can still run: a refusal after all, in the vendor's words.
    assert.equal(asEarlierTryInFlight(conflict, { attempt: 9, scheduledTimestampMs: Date.now() - IN_FLIGHT_CONFLICT_MS - 1_000 }), conflict);
    const badRequest = new VendorRejectedError('seedance answered 400 InvalidParameter', 400, 'InvalidParameter');
    assert.equal(asEarlierTryInFlight(badRequest, { attempt: 3, scheduledTimestampMs: firstScheduled }), badRequest);
  });
});
