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
    execFile(cmd, args, { encoding: 'utf8', timeout: 60_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(' ')}: ${err.message}\n${stderr}`));
      else resolve(JSON.parse(stdout));
    });
  });
}
const goStampede = (key, callers, sleep, value) => run(interopBinary(), ['stampede', redis.addr, key, String(callers), String(sleep), value]);
const nodeStampede = (key, callers, sleep, value) => run(process.execPath, [path.join(jsDir, 'test', 'fixtures', 'stampede.mjs'), redis.addr, key, String(callers), String(sleep), value]);

test('a stampede of 2 Go and 2 Node processes on one cold key makes exactly one loader call', { skip }, async () => {
  for (let round = 0; round < 3; round++) {
    const key = `stampede:${round}`;
    const results = await Promise.all([
      goStampede(key, 25, 400, 'from-go'),
      nodeStampede(key, 25, 400, 'from-node'),
      goStampede(key, 25, 400, 'from-go'),
      nodeStampede(key, 25, 400, 'from-node'),
    ]);
    assert.equal(await raw.get(`loads:${key}`), '1', `round ${round}: loader calls`);
    const values = new Set(results.flatMap((r) => r.values));
    assert.equal(values.size, 1, `round ${round}: every caller got the one load: ${[...values]}`);
  }
});

test('an invalidate from Go voids a Node fill in flight; the next Node caller loads again', { skip }, async () => {
  const c = new Cache(store, { ttl: 60_000 });
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
  const c = new Cache(store, { ttl: 60_000 });
  const go = goStampede('inv:node', 1, 600, 'stale-from-go');
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
