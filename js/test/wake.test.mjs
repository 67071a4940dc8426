// Lease waiters woken by the server (Go's TestLeaseWaitersWokenByServer and
// TestLeaseWaitLostPush, for Node): a caller waiting for another caller's
// lease reads the key through the lease path's push connections (client
// tracking, redirected to a subscriber of __redis__:invalidate) and wakes
// on the holder's fill instead of polling every 1-20 ms; through the
// breaker too; and when the push connections are killed mid-wait it still
// gets the fill.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { Cache, RedisStore, HealthStore } from '../dist/index.js';
import { startRedis, startCluster, serverSkip } from './helpers.mjs';

const skip = serverSkip('redis-server');

/** Wraps a store and counts its reads of any kind while a waiter waits. */
function counting(inner) {
  const n = { plain: 0, watched: 0 };
  const s = Object.create(inner);
  s.getBatch = (node, keys) => {
    n.plain++;
    return inner.getBatch(node, keys);
  };
  s.watchedGetBatch = async (node, keys) => {
    const got = await inner.watchedGetBatch(node, keys);
    n[got.watched ? 'watched' : 'plain']++;
    return got;
  };
  return { s, n };
}

/**
 * A holds key's lease with a loader that waits for release; B waits for
 * A's fill through bStore. Resolves once B has read the key watched.
 */
async function rig(aStore, bStore, bCount, key, bOpts = {}) {
  const a = new Cache(aStore, { ttl: 60_000, leaseWait: 30_000 });
  const b = new Cache(bStore, { ttl: 60_000, leaseWait: 30_000, ...bOpts });
  let entered;
  let release;
  const inA = new Promise((r) => (entered = r));
  const gate = new Promise((r) => (release = r));
  const aDone = a.fetch(key, async () => {
    entered();
    await gate;
    return 'from A';
  });
  await inA;
  let bLoads = 0;
  const bDone = b.fetch(key, async () => {
    bLoads++;
    return 'from B';
  });
  const t0 = Date.now();
  while (bCount.watched === 0) {
    if (Date.now() - t0 > 20_000) throw new Error('B never read the key watched: it polls');
    await new Promise((r) => setTimeout(r, 10));
  }
  return { a, b, aDone, bDone, release, loads: () => bLoads };
}

async function finish(r) {
  r.release();
  assert.equal(await r.aDone, 'from A');
  assert.equal(await r.bDone, 'from A', 'B must get A\'s fill');
  assert.equal(r.loads(), 0, 'B must not load');
  assert.equal(r.b.stats().leaseFailOpen, 0);
}

describe('lease waiters woken by the server', { skip }, () => {
  let server;
  let cluster;
  before(async () => {
    if (skip) return;
    server = await startRedis();
    cluster = await startCluster(3);
  });
  after(async () => {
    await server?.stop();
    await cluster?.stop();
  });

  for (const wrap of ['redis', 'redis through the breaker', 'cluster']) {
    test(`${wrap}: the waiter is woken, not polling, and gets the holder's fill`, async () => {
      const open = () => (wrap === 'cluster' ? new RedisStore({ cluster: cluster.addrs }) : new RedisStore({ addr: server.addr }));
      const aStore = open();
      const bInner = open();
      await Promise.all([aStore.ready(), bInner.ready()]);
      const health = wrap.includes('breaker') ? new HealthStore(bInner) : undefined;
      const { s, n } = counting(health ?? bInner);
      const r = await rig(aStore, s, n, `wake:${wrap}`);
      // Polling reads every 10-20 ms: 20 reads or more in 400 ms. Woken by
      // the server, B reads on the fallback timer (20 ms doubling to 100).
      const before = n.plain + n.watched;
      await new Promise((res) => setTimeout(res, 400));
      const reads = n.plain + n.watched - before;
      assert.ok(reads < 12, `B read the key ${reads} times in 400 ms while waiting: it polls`);
      await finish(r);
      await health?.close();
      await Promise.all([aStore.close(), bInner.close()]);
    });
  }

  test('push connections killed mid-wait: the waiter still gets the fill', async () => {
    const aStore = new RedisStore({ addr: server.addr });
    const bInner = new RedisStore({ addr: server.addr });
    await Promise.all([aStore.ready(), bInner.ready()]);
    const { s, n } = counting(bInner);
    const r = await rig(aStore, s, n, 'wake:killed');
    const admin = new Redis(server.port, '127.0.0.1');
    const list = String(await admin.client('LIST'));
    const ids = list.split('\n').filter((l) => l.includes('name=kura-lease-wake ')).map((l) => l.slice(3, l.indexOf(' ')));
    assert.ok(ids.length >= 2, `want B's reader and subscriber named kura-lease-wake:\n${list}`);
    for (const id of ids) await admin.client('KILL', 'ID', id);
    // The waiter reads again (plainly, then watched once the pair is back).
    const watched0 = n.watched;
    const t0 = Date.now();
    while (n.watched <= watched0 && Date.now() - t0 < 10_000) await new Promise((res) => setTimeout(res, 10));
    assert.ok(n.watched > watched0, 'the push connections did not come back');
    await finish(r);
    await admin.quit();
    await Promise.all([aStore.close(), bInner.close()]);
  });
});
