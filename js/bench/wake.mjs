// A lease waiter woken by the server vs polling, in one run on one private
// redis-server: a holder (its own store, as another process would be)
// takes a key's lease and loads for 5-45 ms; a waiter on another store
// fetches the key meanwhile and is served the holder's fill. Blocks of
// cycles alternate between a waiter whose store has the lease wake-up and
// one whose store hides it (it polls from 1 ms backing off to 20 ms).
// Figures: how late the waiter gets the value after the holder's fetch
// resolved (p50, p99), the waiter's reads per wait, and the server's CPU
// per wait (INFO cpu). Run: cd js && npx tsc -p . && node bench/wake.mjs
import { Redis } from 'ioredis';
import { Cache, RedisStore } from '../dist/index.js';
import { startRedis } from '../test/helpers.mjs';

const BLOCKS = Number(process.env.BLOCKS ?? 6);
const CYCLES = Number(process.env.CYCLES ?? 40);

const redis = await startRedis();
const admin = new Redis(redis.port, '127.0.0.1');
const holderStore = new RedisStore({ addr: redis.addr });
const wokenStore = new RedisStore({ addr: redis.addr });
await Promise.all([holderStore.ready(), wokenStore.ready()]);

/** The store with reads counted; hide drops the wake-up capability. */
function counted(inner, hide) {
  const n = { reads: 0 };
  const s = Object.create(inner);
  s.getBatch = (node, keys) => {
    n.reads++;
    return inner.getBatch(node, keys);
  };
  if (hide) s.watchedGetBatch = undefined;
  else
    s.watchedGetBatch = (node, keys) => {
      n.reads++;
      return inner.watchedGetBatch(node, keys);
    };
  return { s, n };
}

const modes = {
  woken: counted(wokenStore, false),
  polling: counted(new RedisStore({ addr: redis.addr }), true),
};
const holder = new Cache(holderStore, { ttl: 60_000 });
const waiters = Object.fromEntries(Object.entries(modes).map(([m, { s }]) => [m, new Cache(s, { ttl: 60_000, leaseWait: 5000 })]));
const out = { woken: { late: [], reads: 0, waits: 0, cpu: 0 }, polling: { late: [], reads: 0, waits: 0, cpu: 0 } };

async function cpu() {
  const info = String(await admin.info('cpu'));
  let t = 0;
  for (const l of info.split('\n')) {
    const [k, v] = l.trim().split(':');
    if (k === 'used_cpu_user' || k === 'used_cpu_sys') t += Number(v);
  }
  return t;
}

let seq = 0;
async function cycle(mode) {
  const key = `wake:${seq++}`;
  const hold = 5 + Math.random() * 40;
  let entered;
  const inLoad = new Promise((r) => (entered = r));
  let filled = 0;
  const a = holder
    .fetch(key, async () => {
      entered();
      await new Promise((r) => setTimeout(r, hold));
      return 'v';
    })
    .then(() => (filled = performance.now()));
  await inLoad;
  const r0 = modes[mode].n.reads;
  let loaded = false;
  const v = await waiters[mode].fetch(key, async () => {
    loaded = true;
    return 'w';
  });
  const got = performance.now();
  await a;
  if (v !== 'v' || loaded) throw new Error(`${mode}: the waiter did not get the holder's fill`);
  out[mode].late.push(Math.max(0, got - filled));
  out[mode].reads += modes[mode].n.reads - r0;
  out[mode].waits++;
}

// Warm up both (the push connections open on the first wait).
for (const m of Object.keys(modes)) for (let i = 0; i < 5; i++) await cycle(m);
for (const o of Object.values(out)) Object.assign(o, { late: [], reads: 0, waits: 0, cpu: 0 });
for (let b = 0; b < BLOCKS; b++) {
  for (const m of b % 2 === 0 ? ['woken', 'polling'] : ['polling', 'woken']) {
    const c0 = await cpu();
    for (let i = 0; i < CYCLES; i++) await cycle(m);
    out[m].cpu += (await cpu()) - c0;
  }
}
const pct = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
for (const [m, o] of Object.entries(out)) {
  console.log(
    `${m.padEnd(8)} waits ${o.waits}  late p50 ${pct(o.late, 0.5).toFixed(2)} ms  p99 ${pct(o.late, 0.99).toFixed(2)} ms  reads/wait ${(o.reads / o.waits).toFixed(2)}  server CPU/wait ${((o.cpu * 1e6) / o.waits).toFixed(0)} µs`,
  );
}
await Promise.all([holderStore.close(), wokenStore.close(), modes.polling.s.close()]);
await admin.quit();
await redis.stop();
