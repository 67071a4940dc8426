// Leases across languages on real servers -- a redis-server and a pool of 3
// memcached servers: Go processes (internal/harness/nodeinterop) and Node processes
// (fixtures/stampede.mjs, fixtures/history-reader.mjs) share one lease
// protocol per backend (Redis: the placeholder entry, SET NX and the fill
// script; memcached: mg N, ms C<cas>, md), so a mixed stampede loads once,
// an invalidation from either language voids the other's fill, and the
// per-read guarantee holds for Go and Node readers alike.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { Cache } from '../dist/index.js';
import { startRedis, startMemcachedPool, runInterop, interopBinary, serverSkip, jsDir } from './helpers.mjs';
import { openBackend } from './fixtures/backend.mjs';
import { wallClock } from './fixtures/clock.mjs';

function run(cmd, args) {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { encoding: 'utf8', timeout: 60_000, maxBuffer: 256 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(' ')}: ${err.message}\n${stderr}`));
      else resolve(JSON.parse(stdout));
    });
  });
}

const backends = [
  { name: 'redis', bin: 'redis-server', start: async () => { const r = await startRedis(); return { addr: r.addr, stop: r.stop }; } },
  { name: 'memcached (3 servers)', bin: 'memcached', start: async () => { const p = await startMemcachedPool(3); return { addr: p.addr, stop: p.stop }; } },
];

for (const backend of backends) describe(`leases on ${backend.name}`, () => {
const skip = serverSkip(backend.bin);
let server;
let b; // the store and counters
let store;
let raw;

before(async () => {
  if (skip) return;
  interopBinary();
  server = await backend.start();
  b = await openBackend(server.addr);
  store = b.store;
  raw = b;
});
after(async () => {
  await b?.close();
  await server?.stop();
});

const goStampede = (key, callers, sleep, value, procs = 1) => run(interopBinary(), ['stampede', server.addr, key, String(callers), String(sleep), value, String(procs)]);
const nodeStampede = (key, callers, sleep, value, procs = 1) => run(process.execPath, [path.join(jsDir, 'test', 'fixtures', 'stampede.mjs'), server.addr, key, String(callers), String(sleep), value, String(procs)]);

test('a stampede of 2 Go and 2 Node processes on one cold key makes exactly one loader call', { skip }, async () => {
  // Two rounds; the processes wait at a start barrier, so all 100 callers
  // miss together and race for one lease.
  for (let round = 0; round < 2; round++) {
    const key = `stampede:${round}`;
    const results = await Promise.all([
      goStampede(key, 25, 300, 'from-go', 4),
      nodeStampede(key, 25, 300, 'from-node', 4),
      goStampede(key, 25, 300, 'from-go', 4),
      nodeStampede(key, 25, 300, 'from-node', 4),
    ]);
    assert.equal(await raw.get(`loads:${key}`), '1', `round ${round}: loader calls`);
    const values = new Set(results.flatMap((r) => r.values));
    assert.equal(values.size, 1, `round ${round}: every caller got the one load: ${[...values]}`);
  }
});

test('an invalidate from Go voids a Node fill in flight; the next Node caller loads again', { skip }, async () => {
  const c = new Cache(store, { ttl: 60_000, storeTimeout: 5000 });
  let version = 1;
  let started;
  let release;
  const loading = new Promise((r) => (started = r));
  const gate = new Promise((r) => (release = r));
  // The old load is held until the invalidation has returned (no sleep: a
  // Go process takes from 0.3 s to seconds to start on a loaded machine).
  const slow = c.fetch('inv:go', async () => { const v = `v${version}`; started(); await gate; return v; });
  await loading;
  version = 2; // the source of truth changes...
  runInterop('invalidate', server.addr, 'inv:go'); // ...and Go invalidates while Node loads
  // A Node caller arriving after the invalidate returned: never the old load.
  const late = c.fetch('inv:go', async () => `v${version}`);
  release();
  assert.equal(await late, 'v2');
  assert.equal(await slow, 'v1'); // the caller that started before gets its own load
  assert.equal(c.stats().leaseFillsLost, 1, 'the old fill was refused');
  assert.equal(await c.get('inv:go'), 'v2');
});

test('an invalidate from Node voids a Go fill in flight', { skip }, async () => {
  const c = new Cache(store, { ttl: 60_000, storeTimeout: 5000 });
  // Go's load takes 1.5 s after it counts itself: time for this process to
  // see the count and invalidate, even on a loaded machine.
  const go = goStampede('inv:node', 1, 1500, 'stale-from-go', 1);
  // Wait until Go holds the lease (its placeholder is under the key).
  const until = Date.now() + 10_000;
  while ((await raw.get('loads:inv:node')) !== '1' && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
  assert.equal(await raw.get('loads:inv:node'), '1');
  await c.invalidate('inv:node');
  const out = await go;
  assert.deepEqual(out.values, ['stale-from-go']);
  assert.equal(out.fillsLost, 1, 'Go counted its refused fill');
  assert.equal(await raw.getBuffer('inv:node'), null, 'the stale value was not stored');
});

// The system clock in µs, as the readers (Go's time.Now, clock.mjs in Node) read it.
const nowMicros = wallClock();
const nodeReader = (key, leases) => run(process.execPath, [path.join(jsDir, 'test', 'fixtures', 'history-reader.mjs'), server.addr, key, '4', '30000', leases]);
const goReader = (key, leases) => run(interopBinary(), ['history', server.addr, key, '4', '30000', leases]);

// Runs readers in 2 Node and 2 Go processes while this process bumps the
// source of truth and invalidates (alternately from Go and from Node);
// returns the reads (each tagged with its language) and the invalidations.
async function history(key, leases) {
  await raw.set(`src:${key}`, '1');
  const c = new Cache(store, { leases, storeTimeout: 5000 });
  const tag = (lang) => (reads) => reads.map((r) => [...r, lang]);
  const readers = [nodeReader(key, leases).then(tag('node')), nodeReader(key, leases).then(tag('node')), goReader(key, leases).then(tag('go')), goReader(key, leases).then(tag('go'))];
  const invals = [];
  // Start once both reader processes are reading (Node starts in ~0.3-2 s here).
  const ready = Date.now() + 30_000;
  while (Number(await raw.get(`ready:${key}`)) < 4 && Date.now() < ready) await new Promise((r) => setTimeout(r, 10));
  await new Promise((r) => setTimeout(r, 100));
  // At least 1 s and 12 invalidations (a loaded machine makes each slower), at most 15 s.
  const start = Date.now();
  for (let i = 0; (Date.now() - start < 1000 || invals.length < 12) && Date.now() - start < 15_000; i++) {
    const v = await raw.incr(`src:${key}`);
    if (i % 4 === 0) runInterop('invalidate', server.addr, key); // a Go process (~0.3 s to start)
    else await c.invalidate(key);
    invals.push([nowMicros(), v]); // returned at this time; the source was at v before it
    await new Promise((r) => setTimeout(r, 20 + Math.random() * 40));
  }
  await raw.set(`stop:${key}`, '1');
  const reads = (await Promise.all(readers)).flat();
  return { reads, invals };
}

// A read that started after invalidation i returned must return at least
// the version written before it. 2 ms of margin for the wall clock read in
// different processes.
function violations({ reads, invals }) {
  const bad = [];
  const checked = { node: 0, go: 0 };
  for (const [start, endT, v, lang] of reads) {
    let need = 0;
    for (const [t, ver] of invals) if (t + 2000 < start) need = Math.max(need, ver);
    if (need > 0) checked[lang]++;
    if (v < need) bad.push({ lang, start, end: endT, got: v, need });
  }
  return { bad, checked, total: checked.node + checked.go };
}

test('per-read history, Node and Go readers (2 processes each), invalidations from Go and Node: no read after an invalidate is served an older load', { skip, timeout: 90_000 }, async (t) => {
  const h = await history('hist:leases', 'auto');
  const { bad, checked, total } = violations(h);
  assert.ok(h.invals.length >= 10, `${h.invals.length} invalidations`);
  assert.ok(checked.node >= 50 && checked.go >= 50, `reads checked: ${JSON.stringify(checked)}`);
  assert.deepEqual(bad.slice(0, 5), [], `${bad.length} stale reads of ${total}`);
  if (backend.name !== 'redis') {
    t.diagnostic(`leases: 0 stale of ${total} reads (${checked.node} Node, ${checked.go} Go) after ${h.invals.length} invalidations`);
    return;
  }
  // The control (once, on Redis): the same run with leases off, where
  // nothing stops a load that began before an invalidation from being
  // written back after it -- the check can see stale reads.
  const hoff = await history('hist:off', 'off');
  const ctl = violations(hoff);
  assert.ok(ctl.bad.length > 0, 'the control (leases off) shows stale reads: the check can see them');
  t.diagnostic(`leases: 0 stale of ${total} reads (${checked.node} Node, ${checked.go} Go) after ${h.invals.length} invalidations; leases off (control): ${ctl.bad.length} stale of ${ctl.total}`);
});
});
