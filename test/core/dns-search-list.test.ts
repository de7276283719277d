import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { namesTried, parseSearchList, systemSearchList } from '../../core/dns-search-list.ts';

describe("resolv.conf's search list", () => {
  it('reads the last search or domain line and ndots, past comments; LOCALDOMAIN and RES_OPTIONS override them as in glibc', () => {
    const kubernetes = 'nameserver 10.96.0.10\nsearch default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5 timeout:2\n';
    assert.deepEqual(parseSearchList(kubernetes), { domains: ['default.svc.cluster.local', 'svc.cluster.local', 'cluster.local'], ndots: 5 });
    assert.deepEqual(parseSearchList('search a.example b.example\ndomain c.example  # the last wins\n; a comment\n'), { domains: ['c.example'], ndots: 1 });
    assert.deepEqual(parseSearchList('domain c.example\nsearch google.internal. # a root dot\noptions ndots:40'), { domains: ['google.internal'], ndots: 15 });
    assert.deepEqual(parseSearchList(kubernetes, { LOCALDOMAIN: ' corp.example ', RES_OPTIONS: 'ndots:2' }), { domains: ['corp.example'], ndots: 2 });
    assert.deepEqual(parseSearchList(kubernetes, { LOCALDOMAIN: '' }), { domains: [], ndots: 5 });
  });

  it('reads a resolv.conf file, and none when there is no file', () => {
    const directory = mkdtempSync(path.join(tmpdir(), 'framegate-resolv-'));
    try {
      const file = path.join(directory, 'resolv.conf');
      writeFileSync(file, 'search c.project.internal google.internal\n');
      assert.deepEqual(systemSearchList(file, {}).domains, ['c.project.internal', 'google.internal']);
      assert.deepEqual(systemSearchList(file, { LOCALDOMAIN: 'corp.example' }).domains, ['corp.example']);
      assert.deepEqual(systemSearchList(path.join(directory, 'missing'), {}), { domains: [], ndots: 1 });
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });

  it("lists the names tried in getaddrinfo's order", () => {
    const list = { domains: ['ns.svc.cluster.local', 'cluster.local'], ndots: 2 };
    assert.deepEqual(namesTried('vllm', list), ['vllm.ns.svc.cluster.local', 'vllm.cluster.local', 'vllm']);
    assert.deepEqual(namesTried('cdn.example.com', list), ['cdn.example.com', 'cdn.example.com.ns.svc.cluster.local', 'cdn.example.com.cluster.local']);
    assert.deepEqual(namesTried('vllm.', list), ['vllm']);
    assert.deepEqual(namesTried('vllm', { domains: [], ndots: 1 }), ['vllm']);
  });
});
