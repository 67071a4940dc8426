// The read-through API on real servers: a standalone redis-server, a
// 3-master Redis Cluster and a pool of 3 memcached servers run the same checks; then store failures (a dead
// server) and a stalled (SIGSTOP) server under the health breaker.
import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { Cache, Codec, RedisStore, MemcacheStore, HealthStore, parseHeader } from '../dist/index.js';
import { startRedis, startCluster, startMemcachedPool, serverSkip } from './helpers.mjs';

const skip = serverSkip();

function suite(name, open, skipIt = skip) {
  describe(name, { skip: skipIt }, () => {
    let env;
    before(async () => { env = await open(); });
    after(async () => { await env?.close(); });

    test('fetch: a miss loads once, then hits; stats count both', async () => {
      const c = new Cache(env.store, { storeTimeout: 5000,  ttl: 60_000 });
      let loads = 0;
      const load = async (k) => { loads++; return { id: k, n: 1 }; };
      assert.deepEqual(await c.fetch('a:1', load), { id: 'a:1', n: 1 });
      assert.deepEqual(await c.fetch('a:1', load), { id: 'a:1', n: 1 });
      assert.equal(loads, 1);
      const s = c.stats();
      assert.equal(s.hits, 1);
      assert.equal(s.misses, 1);
      assert.equal(s.loads, 1);
      assert.equal(s.writes, 1);
    });

    test('fetchMany: one loader call for the misses, values from both', async () => {
      const c = new Cache(env.store, { storeTimeout: 5000,  ttl: 60_000 });
      await c.set('m:1', 'one');
      const calls = [];
      const got = await c.fetchMany(['m:1', 'm:2', 'm:3', 'm:2', 'm:4'], async (keys) => {
        calls.push([...keys].sort());
        return new Map([['m:2', 'two'], ['m:3', 'three']]);
      });
      assert.deepEqual(calls, [['m:2', 'm:3', 'm:4']]);
      assert.deepEqual(Object.fromEntries(got), { 'm:1': 'one', 'm:2': 'two', 'm:3': 'three' });
      // m:4 was not found: cached negatively, so the next call loads nothing.
      const again = await c.fetchMany(['m:1', 'm:2', 'm:3', 'm:4'], async () => { throw new Error('must not load'); });
      assert.equal(again.size, 3);
      assert.equal(c.stats().negativeHits, 1);
    });

    for (const leases of ['off', 'auto']) {
      test(`concurrent fetches of one key share one load; invalidate voids it for later callers (leases ${leases})`, async () => {
        const c = new Cache(env.store, { storeTimeout: 5000,  ttl: 60_000, leases });
        const key = `s:${leases}`;
        let loads = 0;
        let release;
        const gate = new Promise((r) => (release = r));
        let started;
        const firstStarted = new Promise((r) => (started = r));
        const load = async () => { loads++; const n = loads; if (n === 1) started(); await gate; return `v${n}`; };
        const early = [c.fetch(key, load)];
        await firstStarted;
        early.push(c.fetch(key, load), c.fetch(key, load));
        // Wait until both have joined the running load.
        const joined = Date.now() + 5000;
        while (c.stats().shared < 2 && Date.now() < joined) await new Promise((r) => setTimeout(r, 2));
        assert.equal(c.stats().shared, 2);
        assert.equal(loads, 1);
        await c.invalidate(key);
        // A caller arriving after invalidate returned never gets the old load.
        const late = c.fetch(key, load);
        const until = Date.now() + 2000;
        while (loads < 2 && Date.now() < until) await new Promise((r) => setTimeout(r, 5));
        assert.equal(loads, 2);
        release();
        const got = await Promise.all(early);
        assert.equal(got[0], 'v1');
        if (leases === 'off') assert.deepEqual(got, ['v1', 'v1', 'v1']);
        // With leases, joiners re-read after the load they joined: v1 or the fresh v2, both loaded after they arrived or their own.
        else for (const v of got) assert.ok(v === 'v1' || v === 'v2', v);
        assert.equal(await late, 'v2');
        assert.equal(loads, 2);
        // The voided load was not written back; the later one was.
        assert.equal(await c.get(key), 'v2');
        assert.equal(c.stats().coordination, leases === 'off' ? 'process' : 'leases');
      });
    }

    test('ttl and jitter: written with PX at most the ttl, and the ttl field', async () => {
      const c = new Cache(env.store, { storeTimeout: 5000,  ttl: 10_000, ttlJitter: 0.5 });
      const ttls = [];
      for (let i = 0; i < 20; i++) {
        await c.fetch(`j:${i}`, async () => i);
        ttls.push(await env.pttl(`j:${i}`));
      }
      for (const t of ttls) assert.ok(t > 4000 && t <= 10_000, `pttl ${t}`);
      assert.ok(new Set(ttls.map((t) => Math.round(t / 100))).size > 3, 'jitter spreads the TTLs');
      const h = parseHeader(await env.getRaw('j:0'));
      assert.ok(h.fields.ttl > 4000 && h.fields.ttl <= 10_000);
      assert.ok(Math.abs(h.fields.written - Date.now()) < 60_000);
    });

    test('size guards: a value over maxValueSize is served but not stored', async () => {
      const large = [];
      const c = new Cache(env.store, { storeTimeout: 5000,  maxValueSize: 1000, warnValueSize: 500, onLargeValue: (k, n) => large.push([k, n]), codec: new Codec({ compressor: 'none' }) });
      const v = 'x'.repeat(2000);
      assert.equal(await c.fetch('big:1', async () => v), v);
      assert.equal(await env.getRaw('big:1'), null);
      assert.equal(c.stats().rejected, 1);
      assert.equal(large.length, 1);
      assert.equal(large[0][0], 'big:1');
    });

    test('entries a newer writer wrote are loaded around, never overwritten; malformed ones are', async () => {
      const c = new Cache(env.store, { storeTimeout: 5000, });
      const future = Buffer.from('c14b04000001000001c0', 'hex');
      await env.setRaw('nu:1', future);
      await env.setRaw('bad:1', Buffer.from('c14b0101000005c0', 'hex'));
      assert.equal(await c.fetch('nu:1', async () => 'loaded'), 'loaded');
      assert.equal(await c.fetch('bad:1', async () => 'loaded'), 'loaded');
      assert.deepEqual(await env.getRaw('nu:1'), future);
      assert.equal(await c.get('bad:1'), 'loaded');
      const s = c.stats();
      assert.equal(s.notUnderstood, 1);
      assert.equal(s.decodeErrors, 1);
    });

    test('a schema mismatch is a miss; a young one is not overwritten', async () => {
      const old = new Cache(env.store, { storeTimeout: 5000,  schema: '{"name":string}' });
      const now = new Cache(env.store, { storeTimeout: 5000,  schema: '{"name":string,"age":int}', validate: (v) => typeof v?.age === 'number' });
      await old.set('sc:1', { name: 'ann' });
      assert.deepEqual(await now.fetch('sc:1', async () => ({ name: 'ann', age: 3 })), { name: 'ann', age: 3 });
      assert.equal(now.stats().schemaMismatches, 1);
      assert.equal(now.stats().schemaKept, 1);
      assert.deepEqual(await old.get('sc:1'), { name: 'ann' });
    });

    test('AbortSignal: the caller stops waiting; the load goes on for others', async () => {
      const c = new Cache(env.store, { storeTimeout: 5000, });
      let release;
      const gate = new Promise((r) => (release = r));
      const ac = new AbortController();
      let started;
      const loading = new Promise((r) => (started = r));
      const p1 = c.fetch('ab:1', async () => { started(); await gate; return 'v'; }, { signal: ac.signal });
      await loading; // p1's load is running: p2 joins it
      const p2 = c.fetch('ab:1', async () => 'other');
      // Abort only once p2 has joined p1's load (no sleep: a loaded machine
      // made 20 ms too short for p2's read to come back).
      while (c.stats().shared < 1) await new Promise((r) => setImmediate(r));
      ac.abort(new Error('caller gave up'));
      await assert.rejects(p1, /caller gave up/);
      release();
      assert.equal(await p2, 'v');
    });

    test('loader errors reach the caller and are not cached', async () => {
      const c = new Cache(env.store, { storeTimeout: 5000, });
      await assert.rejects(c.fetch('le:1', async () => { throw new Error('db down'); }), /db down/);
      assert.equal(await c.fetch('le:1', async () => 'ok'), 'ok');
      assert.equal(c.stats().loadErrors, 1);
    });
  });
}

function rawHelpers(client) {
  return {
    pttl: (k) => client.pttl(k),
    getRaw: (k) => client.getBuffer(k),
    setRaw: (k, v) => client.set(k, v),
  };
}

suite('3-server memcached pool', async () => {
  const pool = await startMemcachedPool(3);
  const store = new MemcacheStore({ servers: pool.servers });
  const one = async (k, req) => {
    const conn = new (await import('../dist/index.js')).MetaConnection(store.nodeOf(k));
    try {
      return (await conn.exec([req], false))[0];
    } finally {
      conn.close();
    }
  };
  return {
    store,
    pttl: async (k) => (await one(k, { cmd: 'mg', key: k, returnTTL: true })).ttl * 1000,
    getRaw: async (k) => (await store.getBatch(store.nodeOf(k), [k]))[0],
    setRaw: (k, v) => store.setBatch(store.nodeOf(k), [{ key: k, value: v, ttl: 0 }]),
    close: async () => { await store.close(); await pool.stop(); },
  };
}, serverSkip('memcached'));

suite('standalone redis-server', async () => {
  const r = await startRedis();
  const store = new RedisStore({ addr: r.addr });
  await store.ready();
  return { store, ...rawHelpers(store.client), close: async () => { await store.close(); await r.stop(); } };
});

suite('3-master Redis Cluster', async () => {
  const cl = await startCluster(3);
  const store = new RedisStore({ cluster: cl.addrs });
  await store.ready();
  assert.equal(store.nodes().length, 3);
  return { store, ...rawHelpers(store.client), close: async () => { await store.close(); await cl.stop(); } };
});

describe('failures never reach a fetch caller', { skip }, () => {
  test('a dead server: every fetch is served by the loader', async () => {
    const r = await startRedis();
    const store = new RedisStore({ addr: r.addr });
    await store.ready();
    await r.stop();
    const errors = [];
    const c = new Cache(store, { onError: (op, key, err) => errors.push(op) });
    for (let i = 0; i < 5; i++) assert.equal(await c.fetch(`d:${i}`, async () => i), i);
    assert.ok(c.stats().storeErrors >= 5);
    assert.ok(errors.length >= 5);
    await store.close();
  });

  test('a stalled server (SIGSTOP): callers wait at most storeTimeout, the node goes down and its keys go straight to the loader; it comes back after SIGCONT', async () => {
    const r = await startRedis();
    const inner = new RedisStore({ addr: r.addr });
    await inner.ready();
    const transitions = [];
    const hs = new HealthStore(inner, { onStateChange: (t) => transitions.push(`${t.from}->${t.to}`) });
    const c = new Cache(hs, { ttl: 60_000 });
    try {
      assert.equal(await c.fetch('h:1', async () => 'v'), 'v');
      assert.equal(await c.fetch('h:1', async () => 'loaded'), 'v'); // a hit
      await r.stall();
      // 64 concurrent callers while stalled: all served by the loader, none sees an error.
      const res = await Promise.all(Array.from({ length: 64 }, (_, i) => c.fetch(`h:${i % 8}`, async (k) => `L${k}`)));
      assert.equal(res.length, 64);
      for (const v of res) assert.match(v, /^Lh:\d$/);
      // The probe (one in flight, its own connection) takes the node down.
      const until = Date.now() + 5000;
      while (hs.state(r.addr) !== 'down' && Date.now() < until) await new Promise((x) => setTimeout(x, 20));
      assert.equal(hs.state(r.addr), 'down');
      const before = hs.stats()[0];
      assert.ok(before.probes - before.probeFailures <= before.probes, 'probes counted');
      // Down: no waiting, the keys go straight to the loader.
      const t0 = performance.now();
      assert.equal(await c.fetch('h:1', async () => 'fast'), 'fast');
      assert.ok(performance.now() - t0 < 200, 'a down node is not waited for');
      assert.ok(hs.stats()[0].failFast >= 1);
      r.resume();
      const until2 = Date.now() + 10_000;
      while (hs.state(r.addr) !== 'up' && Date.now() < until2) await new Promise((x) => setTimeout(x, 20));
      assert.equal(hs.state(r.addr), 'up');
      // Data intact: hits resume (the value may be a loader's: write-backs
      // queued during the stall reach the server when it resumes).
      let called = false;
      const v = await c.fetch('h:1', async () => { called = true; return 'loaded'; });
      assert.equal(called, false);
      assert.ok(v === 'v' || v === 'Lh:1', v);
      assert.ok(transitions.includes('suspect->down') || transitions.includes('up->suspect'), transitions.join(','));
      assert.ok(transitions.includes('probing->up'), transitions.join(','));
    } finally {
      r.resume();
      await hs.close();
      await inner.close();
      await r.stop();
    }
  });

  test('probes: never more than one in flight per node while it is stalled', async () => {
    const r = await startRedis();
    const inner = new RedisStore({ addr: r.addr });
    await inner.ready();
    // Count PINGs reaching the server from the probe connection: CLIENT LIST shows its last command.
    const hs = new HealthStore(inner, { probeInterval: 10, probeTimeout: 20, backoffMin: 10, backoffMax: 20 });
    const watcher = new Redis({ host: '127.0.0.1', port: r.port });
    try {
      await new Promise((x) => setTimeout(x, 100));
      const pingsBefore = Number((await watcher.info('commandstats')).match(/cmdstat_ping:calls=(\d+)/)?.[1] ?? 0);
      const sentBefore = hs.stats()[0].probesSent;
      await r.stall();
      await new Promise((x) => setTimeout(x, 500)); // ~25 probe rounds at 10-20 ms
      const during = hs.stats()[0];
      r.resume();
      await new Promise((x) => setTimeout(x, 100));
      const pingsAfter = Number((await watcher.info('commandstats')).match(/cmdstat_ping:calls=(\d+)/)?.[1] ?? 0);
      const sentAfter = hs.stats()[0].probesSent;
      // While stalled only the one probe already sent was pending; the rounds
      // in between counted as failures without sending another PING.
      assert.ok(during.probeFailures >= 5, `probe failures ${during.probeFailures}`);
      assert.ok(during.probesSent - sentBefore <= 1, `probes sent during the stall: ${during.probesSent - sentBefore}`);
      assert.equal(during.state, 'down');
      // And the server saw the PINGs the monitor says it sent (give or take
      // the one in flight while INFO was read: probes go on every 10 ms).
      const seen = pingsAfter - pingsBefore;
      const sent = sentAfter - sentBefore;
      assert.ok(Math.abs(seen - sent) <= 1, `server saw ${seen} PINGs, monitor sent ${sent}`);
    } finally {
      watcher.disconnect();
      await hs.close();
      await inner.close();
      await r.stop();
    }
  });
});
