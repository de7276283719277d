import { createSocket, type Socket } from 'node:dgram';
import dnsPacket from 'dns-packet';

// The test suite's DNS server: a real one, on loopback UDP, that the api's resolver (c-ares,
// core/host-names.ts) asks through DNS_SERVERS. Tests need names that lead inside, as
// `169.254.169.254.nip.io` does from anywhere, on machines that may reach no DNS server at all.
// Like nip.io, the answer is written in the name, under the zone `nip.test`:
//
//   169-254-169-254.nip.test            A 169.254.169.254
//   93-184-216-34.10-0-0-7.nip.test     A 93.184.216.34 and A 10.0.0.7
//   v6-fd00--1.nip.test                 AAAA fd00::1
//   servfail.nip.test                   SERVFAIL
//   silent.nip.test                     no reply at all (a zone whose server never answers)
//   anything.wild.test                  A 10.0.0.1 (an internal zone answering every name)
//
// A name with addresses of one family has no records of the other (NOERROR, empty). Every other
// name does not exist (NXDOMAIN), as public names do on a machine without DNS.

const ZONE = '.nip.test';
const IPV4_LABEL = /^(\d{1,3})-(\d{1,3})-(\d{1,3})-(\d{1,3})$/;

type Reply = { rcode: 'NOERROR' | 'NXDOMAIN' | 'SERVFAIL'; answers: dnsPacket.Answer[] } | 'silent';

function replyFor(name: string, type: string): Reply {
  const lower = name.toLowerCase().replace(/\.$/, '');
  if (lower.endsWith('.wild.test')) return { rcode: 'NOERROR', answers: type === 'A' ? [{ type: 'A', name, ttl: 0, data: '10.0.0.1' }] : [] };
  if (!lower.endsWith(ZONE)) return { rcode: 'NXDOMAIN', answers: [] };
  const labels = lower.slice(0, -ZONE.length).split('.');
  if (labels.length === 1 && labels[0] === 'silent') return 'silent';
  if (labels.length === 1 && labels[0] === 'servfail') return { rcode: 'SERVFAIL', answers: [] };
  const v4: string[] = [];
  const v6: string[] = [];
  for (const label of labels) {
    const quad = IPV4_LABEL.exec(label);
    if (quad) v4.push(quad.slice(1).join('.'));
    else if (label.startsWith('v6-')) v6.push(label.slice(3).replaceAll('-', ':'));
    else return { rcode: 'NXDOMAIN', answers: [] };
  }
  const answers: dnsPacket.Answer[] =
    type === 'A' ? v4.map((data) => ({ type: 'A', name, ttl: 0, data })) : type === 'AAAA' ? v6.map((data) => ({ type: 'AAAA', name, ttl: 0, data })) : [];
  return { rcode: 'NOERROR', answers };
}

/** Starts the server on 127.0.0.1 at a free port; resolves to its `host:port`, the names asked
 * so far (with their type: `A example.com`), and a stop. */
export async function startTestDnsServer(): Promise<{ address: string; asked: string[]; stop: () => Promise<void> }> {
  const socket: Socket = createSocket('udp4');
  const asked: string[] = [];
  socket.on('message', (message, sender) => {
    let query: dnsPacket.DecodedPacket;
    try {
      query = dnsPacket.decode(message);
    } catch {
      return;
    }
    const question = query.questions?.[0];
    if (!question) return;
    asked.push(`${question.type} ${question.name}`);
    const reply = replyFor(question.name, question.type);
    if (reply === 'silent') return;
    const flags = dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE | (reply.rcode === 'NXDOMAIN' ? 3 : reply.rcode === 'SERVFAIL' ? 2 : 0);
    const packet = dnsPacket.encode({ type: 'response', id: query.id, flags, questions: [question], answers: reply.answers });
    socket.send(packet, sender.port, sender.address);
  });
  await new Promise<void>((ready, fail) => {
    socket.once('error', fail);
    socket.bind(0, '127.0.0.1', () => ready());
  });
  return {
    address: `127.0.0.1:${socket.address().port}`,
    asked,
    stop: () => new Promise((done) => socket.close(() => done())),
  };
}
