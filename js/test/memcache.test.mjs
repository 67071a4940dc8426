// kura's memcached client for Node: the ketama ring and the key forms agree
// with Go's store/memcache key for key, the response parser survives
// hostile bytes, and the Store and Cache work on a real pool of 3 servers.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { KetamaRing, wireKey, ResponseParser, MetaProtocolError, MetaServerError, MemcacheStore, Cache, HealthStore } from '../dist/index.js';
import { interopBinary, repoDir, rng, serverSkip, startMemcachedPool } from './helpers.mjs';


function randomKey(r) {
  const kinds = ['user:', 'article:', 'キー', 'with space ', '\t', 'é', 'x'];
  let k = '';
  const n = 1 + Math.floor(r() * (r() < 0.1 ? 120 : 6));
  for (let i = 0; i < n; i++) k += kinds[Math.floor(r() * kinds.length)] + Math.floor(r() * 1e6);
  return k;
}

const goJSON = (args, input) => JSON.parse(execFileSync(interopBinary(), args, { input: JSON.stringify(input), encoding: 'utf8', maxBuffer: 64 << 20 }));

test('ketama: the golden placements of Go\'s store/memcache (weights 1,1,2,1)', () => {
  const lines = fs.readFileSync(path.join(repoDir, 'store', 'memcache', 'testdata', 'ketama_golden.txt'), 'utf8').split('\n').filter((l) => l && !l.startsWith('#'));
  const ring = new KetamaRing([{ addr: '10.0.0.1:11211' }, { addr: '10.0.0.2:11211' }, { addr: '10.0.0.3:11211', weight: 2 }, { addr: '10.0.0.4:11211' }]);
  for (const l of lines) {
    const [k, want] = l.split(' ');
    assert.equal(ring.server(k), want, k);
  }
  assert.equal(lines.length, 200);
});

test('ketama: every key on the server Go picks, for several pools (2,000 keys each, Unicode, spaces, long keys)', () => {
  const r = rng(11);
  const keys = Array.from({ length: 2000 }, () => randomKey(r));
  const pools = [
    { servers: ['127.0.0.1:11211', '127.0.0.1:11212', '127.0.0.1:11213'], weights: [1, 1, 1] },
    { servers: ['cache-a:11211', 'cache-b:11211'], weights: [3, 1] },
    { servers: ['10.1.0.1:11211', '10.1.0.2:11211', '10.1.0.3:11211', '10.1.0.4:11211', '10.1.0.5:11211'], weights: [1, 2, 1, 5, 1] },
    { servers: ['solo:11211'], weights: [1] },
  ];
  for (const p of pools) {
    const ring = new KetamaRing(p.servers.map((addr, i) => ({ addr, weight: p.weights[i] })));
    const go = goJSON(['ring', p.servers.join(','), p.weights.join(',')], keys);
    const diff = keys.filter((k, i) => ring.server(k) !== go[i]);
    assert.deepEqual(diff.slice(0, 5), [], `${diff.length} of ${keys.length} keys placed differently from Go on ${p.servers}`);
  }
});

test('key forms: the wire token of every key is Go\'s (plain, base64, hashed)', () => {
  const r = rng(5);
  const keys = [
    'user:42', 'a', 'x'.repeat(250), 'x'.repeat(251), 'with space', 'tab\there', 'nul\x00inside', '\x00leading',
    'del\x7f', 'キー:1', 'é'.repeat(93), 'é'.repeat(94), ' '.repeat(186), ' '.repeat(187), 'y'.repeat(1000), 'z'.repeat(186) + ' ',
    ...Array.from({ length: 300 }, () => randomKey(r)),
  ];
  const go = goJSON(['wirekeys'], keys);
  keys.forEach((k, i) => {
    const { token, b64 } = wireKey(k);
    assert.equal(token + (b64 ? ' b' : ''), go[i], JSON.stringify(k).slice(0, 80));
  });
  assert.throws(() => wireKey(''), RangeError);
});

test('response parser: answers split at every byte boundary parse the same', () => {
  const stream = Buffer.from('HD\r\nVA 5 c12 W O3\r\nhello\r\nEN\r\nVA 0 Z\r\n\r\nSERVER_ERROR out of memory\r\nNF O2\r\nMN\r\nVA 3 t-1 s3 X\r\na\r\n\r\n');
  const whole = new ResponseParser().push(stream);
  assert.equal(whole.length, 8);
  assert.equal(whole[1].value.toString(), 'hello');
  assert.equal(whole[1].cas, 12n);
  assert.ok(whole[1].won);
  assert.equal(whole[1].opaque, 3);
  assert.ok(whole[4] instanceof MetaServerError);
  assert.equal(whole[7].value.toString(), 'a\r\n');
  for (let cut = 0; cut <= stream.length; cut++) {
    const p = new ResponseParser();
    const got = [...p.push(stream.subarray(0, cut)), ...p.push(stream.subarray(cut))];
    assert.deepEqual(got, whole, `cut at ${cut}`);
  }
});

test('fuzz: the response parser answers or throws MetaProtocolError on hostile bytes, and never buffers past its limits', () => {
  const r = rng(99);
  const seeds = ['HD\r\n', 'VA 5 c12 W O3\r\nhello\r\n', 'EN\r\n', 'MN\r\n', 'VA 0 Z c7\r\n\r\n', 'CLIENT_ERROR bad command line format\r\n', 'EX O9\r\n', 'VA 2 t30 s2 f0 k\r\nab\r\n'];
  let refused = 0;
  for (let iter = 0; iter < 10000; iter++) {
    let b = Buffer.from(Array.from({ length: 1 + Math.floor(r() * 4) }, () => seeds[Math.floor(r() * seeds.length)]).join(''));
    const k = Math.floor(r() * 4);
    for (let j = 0; j < k && b.length > 0; j++) {
      const at = Math.floor(r() * b.length);
      const op = Math.floor(r() * 4);
      if (op === 0) b[at] = Math.floor(r() * 256);
      else if (op === 1) b = b.subarray(0, at);
      else if (op === 2) b = Buffer.concat([b.subarray(0, at), Buffer.from(String(Math.floor(r() * 1e12))), b.subarray(at)]);
      else b = Buffer.concat([b.subarray(0, at), Buffer.from([32, 13, 10][Math.floor(r() * 3)].toString()), b.subarray(at)]);
    }
    const p = new ResponseParser(1 << 16);
    try {
      let off = 0;
      while (off < b.length) {
        const n = 1 + Math.floor(r() * 16);
        for (const a of p.push(b.subarray(off, off + n))) assert.ok(a instanceof MetaServerError || typeof a.status === 'string');
        off += n;
      }
    } catch (e) {
      assert.ok(e instanceof MetaProtocolError, `${JSON.stringify(b.toString('latin1'))}: ${e?.stack ?? e}`);
      refused++;
    }
  }
  assert.ok(refused > 0);
  // A line that never ends, and a value claiming more than the limit, are refused without being buffered.
  assert.throws(() => new ResponseParser().push(Buffer.alloc(9000, 0x41)), MetaProtocolError);
  assert.throws(() => new ResponseParser(1024).push(Buffer.from('VA 1025\r\n')), MetaProtocolError);
  assert.throws(() => new ResponseParser().push(Buffer.from('VA 99999999999999999999\r\n')), MetaProtocolError);
});

const skip = serverSkip('memcached');
let pool;
let store;
before(async () => {
  if (skip) return;
  pool = await startMemcachedPool(3);
  store = new MemcacheStore({ servers: pool.servers });
});
after(async () => {
  await store?.close();
  await pool?.stop();
});

test('memcached pool: batches per server, keys of every form, fetchMany loads misses once', { skip }, async () => {
  const keys = ['plain:1', 'with space', 'x'.repeat(300), 'キー', ...Array.from({ length: 60 }, (_, i) => `k:${i}`)];
  const c = new Cache(store, { ttl: 60_000, storeTimeout: 5000 });
  let calls = 0;
  const first = await c.fetchMany(keys, async (ks) => {
    calls++;
    return new Map(ks.filter((k) => k !== 'k:7').map((k) => [k, { k, n: k.length }]));
  });
  assert.equal(calls, 1);
  assert.equal(first.size, keys.length - 1);
  const byNode = new Set(keys.map((k) => store.nodeOf(k)));
  assert.equal(byNode.size, 3, 'the keys spread over the 3 servers');
  const again = await c.fetchMany(keys, async () => { throw new Error('must hit'); });
  assert.deepEqual([...again.entries()].sort(), [...first.entries()].sort());
  assert.equal(c.stats().negativeHits, 1, 'k:7 is cached as not found');
  await c.invalidate('with space', 'x'.repeat(300));
  let reloaded = [];
  await c.fetchMany(keys, async (ks) => { reloaded = ks; return new Map(ks.map((k) => [k, { k, n: 0 }])); });
  assert.deepEqual(reloaded.sort(), ['with space', 'x'.repeat(300)].sort());
});

test('memcached: the empty key (no wire form) is a miss of its own; the keys read with it still hit', { skip }, async () => {
  const c = new Cache(store, { ttl: 60_000, storeTimeout: 5000 });
  const keys = Array.from({ length: 20 }, (_, i) => `ek:${i}`);
  await c.fetchMany(keys, async (ks) => new Map(ks.map((k) => [k, k])));
  let loaded = [];
  const got = await c.fetchMany(['', ...keys], async (ks) => { loaded = ks; return new Map(ks.map((k) => [k, `L${k}`])); });
  assert.deepEqual(loaded, ['']);
  assert.equal(got.get(''), 'L');
  for (const k of keys) assert.equal(got.get(k), k);
});

test('memcached: a stalled server\'s keys go to the loader within the store budget; the others keep hitting', { skip, timeout: 30_000 }, async () => {
  const hs = new HealthStore(store);
  // A budget a loaded machine's live servers answer within; the stopped one never answers.
  const c = new Cache(hs, { ttl: 60_000, storeTimeout: 1500 });
  const keys = Array.from({ length: 30 }, (_, i) => `stall:${i}`);
  await c.fetchMany(keys, async (ks) => new Map(ks.map((k) => [k, k])));
  const victim = pool.nodes[0];
  const onVictim = keys.filter((k) => store.nodeOf(k) === victim.addr);
  assert.ok(onVictim.length > 0);
  await victim.stall();
  try {
    let loaded = [];
    const got = await c.fetchMany(keys, async (ks) => { loaded = ks; return new Map(ks.map((k) => [k, k])); });
    assert.equal(got.size, keys.length, 'every caller got a value');
    assert.deepEqual(loaded.sort(), onVictim.sort(), 'only the stalled server\'s keys were loaded');
  } finally {
    victim.resume();
    await hs.close?.();
  }
});

test('memcached: a stalled server\'s connection is dropped after readTimeout (its requests fail, nothing piles up); after SIGCONT it works again', { skip, timeout: 30_000 }, async () => {
  const victim = pool.nodes[1];
  const s = new MemcacheStore({ servers: pool.servers, readTimeout: 1000 });
  const key = Array.from({ length: 100 }, (_, i) => `rt:${i}`).find((k) => s.nodeOf(k) === victim.addr);
  await store.setBatch(victim.addr, [{ key, value: Buffer.from('v'), ttl: 60_000 }]);
  await victim.stall();
  try {
    await assert.rejects(s.getBatch(victim.addr, [key]), /no answer for 1000 ms/);
  } finally {
    victim.resume();
  }
  // The same store reconnects. (A machine with dozens of jobs per core may
  // delay an answer past 1 s: only such misses are tried again.)
  let got;
  for (let i = 0; i < 5 && got === undefined; i++) {
    try {
      got = await s.getBatch(victim.addr, [key]);
    } catch (err) {
      if (!/no answer/.test(err.message)) throw err;
    }
  }
  assert.deepEqual(got, [Buffer.from('v')]);
  await s.close();
});
