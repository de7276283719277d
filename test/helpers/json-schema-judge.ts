import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { projectRoot } from '../../scripts/lib/engines.ts';

// Judges values by a schema of the OpenAPI document (JSON Schema 2020-12), with the
// jsonschema_rs validator that Schemathesis brings into the tool environment: what the
// document calls valid, set against what the running gateway accepts.

/** Whether each value is valid by the JSON Schema `schema` (draft 2020-12). */
export function validByDocument(schema: unknown, values: unknown[]): boolean[] {
  const check = spawnSync(
    path.join(projectRoot, '.tools/venv/bin/python'),
    ['-c', 'import json, sys\nfrom jsonschema_rs import Draft202012Validator\ngiven = json.load(sys.stdin)\nvalidator = Draft202012Validator(given["schema"])\nprint(json.dumps([validator.is_valid(value) for value in given["values"]]))'],
    { input: JSON.stringify({ schema, values }), encoding: 'utf8' },
  );
  assert.equal(check.status, 0, check.stderr);
  return JSON.parse(check.stdout) as boolean[];
}
