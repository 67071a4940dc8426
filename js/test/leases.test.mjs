// Leases across languages on a real redis-server: Go processes
// (internal/nodeinterop) and Node processes (fixtures/stampede.mjs) share
// one placeholder protocol, so a mixed stampede loads once, and an
// invalidation from either language voids the other's fill.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { Redis } from 'ioredis';
import { Cache, RedisStore } from '../dist/index.js';
import { startRedis, runInterop, interopBinary, serverSkip, jsDir } from './helpers.mjs';

const skip = serverSkip();
let redis;
let store;
let raw;

before(async () => {
  if (skip) return;
  interopBinary();
  redis = await startRedis();
  store = new RedisStore({ addr: redis.addr });
  await store.ready();
  raw = new Redis({ host: '127.0.0.1', port: redis.port });
});
after(async () => {
  raw?.disconnect();
  await store?.close();
  await redis?.stop();
});

function run(cmd, args) {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { encoding: 'utf8', timeout: 60_000, maxBuffer: 256 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(' ')}: ${err.message}\n${stderr}`));
      else resolve(JSON.parse(stdout));
    });
  });
}
const goStampede = (key, callers, sleep, value, procs = 1) => run(interopBinary(), ['stampede', redis.addr, key, String(callers), String(sleep), value, String(procs)]);
const nodeStampede = (key, callers, sleep, value, procs = 1) => run(process.execPath, [path.join(jsDir, 'test', 'fixtures', 'stampede.mjs'), redis.addr, key, String(callers), String(sleep), value, String(procs)]);

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
  const loading = new Promise((r) => (started = r));
  const slow = c.fetch('inv:go', async () => { const v = `v${version}`; started(); await new Promise((r) => setTimeout(r, 300)); return v; });
  await loading;
  version = 2; // the source of truth changes...
  runInterop('invalidate', redis.addr, 'inv:go'); // ...and Go invalidates while Node loads
  // A Node caller arriving after the invalidate returned: never the old load.
  const late = await c.fetch('inv:go', async () => `v${version}`);
  assert.equal(late, 'v2');
  assert.equal(await slow, 'v1'); // the caller that started before gets its own load
  assert.equal(c.stats().leaseFillsLost, 1, 'the old fill was refused');
  assert.equal(await c.get('inv:go'), 'v2');
});

test('an invalidate from Node voids a Go fill in flight', { skip }, async () => {
  const c = new Cache(store, { ttl: 60_000, storeTimeout: 5000 });
  const go = goStampede('inv:node', 1, 600, 'stale-from-go', 1);
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

const nowMicros = () => Math.round((performance.timeOrigin + performance.now()) * 1000);
const reader = (key, leases) => run(process.execPath, [path.join(jsDir, 'test', 'fixtures', 'history-reader.mjs'), redis.addr, key, '4', '30000', leases]);

// Runs readers in 2 Node processes while this process bumps the source of
// truth and invalidates (alternately from Go and from Node); returns the
// reads and the invalidations.
async function history(key, leases) {
  await raw.set(`src:${key}`, '1');
  const c = new Cache(store, { leases, storeTimeout: 5000 });
  const readers = [reader(key, leases), reader(key, leases)];
  const invals = [];
  // Start once both reader processes are reading (Node starts in ~0.3-2 s here).
  const ready = Date.now() + 30_000;
  while (Number(await raw.get(`ready:${key}`)) < 2 && Date.now() < ready) await new Promise((r) => setTimeout(r, 10));
  await new Promise((r) => setTimeout(r, 100));
  // At least 1 s and 12 invalidations (a loaded machine makes each slower), at most 15 s.
  const start = Date.now();
  for (let i = 0; (Date.now() - start < 1000 || invals.length < 12) && Date.now() - start < 15_000; i++) {
    const v = await raw.incr(`src:${key}`);
    if (i % 4 === 0) runInterop('invalidate', redis.addr, key); // a Go process (~0.3 s to start)
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
  let checked = 0;
  for (const [start, endT, v] of reads) {
    let need = 0;
    for (const [t, ver] of invals) if (t + 2000 < start) need = Math.max(need, ver);
    if (need > 0) checked++;
    if (v < need) bad.push({ start, end: endT, got: v, need });
  }
  return { bad, checked };
}

test('per-read history, Node readers in 2 processes, invalidations from Go and Node: no read after an invalidate is served an older load', { skip, timeout: 60_000 }, async (t) => {
  const h = await history('hist:leases', 'auto');
  const { bad, checked } = violations(h);
  assert.ok(h.invals.length >= 10, `${h.invals.length} invalidations`);
  assert.ok(checked >= 50, `${checked} reads checked`);
  assert.deepEqual(bad.slice(0, 5), [], `${bad.length} stale reads of ${checked}`);
  // The control: the same run with leases off, where nothing stops a load
  // that began before an invalidation from being written back after it.
  const hoff = await history('hist:off', 'off');
  const ctl = violations(hoff);
  assert.ok(ctl.bad.length > 0, 'the control (leases off) shows stale reads: the check can see them');
  t.diagnostic(`leases: 0 stale of ${checked} reads after ${h.invals.length} invalidations; leases off (control): ${ctl.bad.length} stale of ${ctl.checked}`);
});
