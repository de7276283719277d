import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { callerWording } from '../../activities/vendor.ts';
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
});
