// Warm-hit throughput and bytes on the wire, kura vs the peers, in one run
// on one private redis-server: 1 KB objects, 64 concurrent callers,
// interleaved rounds, medians. Run: cd js && npm run bench
import { Redis } from 'ioredis';
import snappy from 'snappy';
import { createCache } from 'cache-manager';
import { Keyv } from 'keyv';
import KeyvRedis from '@keyv/redis';
import { BentoCache, bentostore } from 'bentocache';
import { redisDriver } from 'bentocache/drivers/redis';
import { Cache, RedisStore } from '../dist/index.js';
import { startRedis } from '../test/helpers.mjs';
import { record } from './record.mjs';

const KEYS = 1000;
const CALLERS = 64;
const ROUND_MS = Number(process.env.ROUND_MS ?? 1000);
const ROUNDS = Number(process.env.ROUNDS ?? 5);

const redis = await startRedis();
const [host, port] = [redis.addr.split(':')[0], Number(redis.addr.split(':')[1])];
const plain = new Redis({ host, port });
const plainAP = new Redis({ host, port, enableAutoPipelining: true });
const store = new RedisStore({ addr: redis.addr });
await store.ready();
// A generous store budget: this measures hits, not the 250 ms default's
// behaviour on a machine shared by other jobs (loads are counted below).
const kura = new Cache(store, { ttl: 3600_000, storeTimeout: 5000 });
const keyv = new Keyv({ store: new KeyvRedis(`redis://${redis.addr}`), namespace: 'kv' });
const cm = createCache({ stores: [new Keyv({ store: new KeyvRedis(`redis://${redis.addr}`), namespace: 'cm' })] });
// BentoCache with its Redis layer only (no in-memory L1, as kura here: every hit is a read from Redis).
const bento = new BentoCache({ default: 'r', stores: { r: bentostore().useL2Layer(redisDriver({ connection: { host, port } })) } });

const recs = Array.from({ length: KEYS }, (_, i) => record(i));
let bytesJSON = 0, bytesSnappy = 0, bytesKura = 0;
for (let i = 0; i < KEYS; i++) {
  const json = JSON.stringify(recs[i]);
  const sn = snappy.compressSync(json);
  bytesJSON += Buffer.byteLength(json);
  bytesSnappy += sn.length;
  await plain.set(`plain:${i}`, json);
  await plain.set(`snappy:${i}`, sn);
  await kura.set(`kura:${i}`, recs[i]);
  bytesKura += (await plain.getBuffer(`kura:${i}`)).length;
  await keyv.set(`${i}`, recs[i]);
  await cm.set(`${i}`, recs[i]);
  await bento.set({ key: `${i}`, value: recs[i], ttl: '1h' });
}

let loads = 0;
const fail = (k) => { loads++; return recs[Number(String(k).split(':').pop())]; };
const peers = {
  'plain GET + JSON.parse': (i) => plain.get(`plain:${i}`).then((s) => JSON.parse(s)),
  'plain GET + JSON.parse, ioredis auto-pipelining': (i) => plainAP.get(`plain:${i}`).then((s) => JSON.parse(s)),
  'GET + snappy + JSON.parse (the field report)': (i) => plain.getBuffer(`snappy:${i}`).then((b) => JSON.parse(snappy.uncompressSync(b, { asBuffer: false }))),
  'kura fetch': (i) => kura.fetch(`kura:${i}`, fail),
  'keyv get (@keyv/redis)': (i) => keyv.get(`${i}`),
  'cache-manager wrap (keyv redis store)': (i) => cm.wrap(`${i}`, fail),
  'BentoCache getOrSet (Redis layer, no L1)': (i) => bento.getOrSet({ key: `${i}`, factory: () => fail(`b:${i}`), ttl: '1h' }),
};

const cpu = new Map();
async function round(fn) {
  let ops = 0;
  const c0 = process.cpuUsage();
  const end = performance.now() + ROUND_MS;
  await Promise.all(Array.from({ length: CALLERS }, async (_, c) => {
    let i = c * 13;
    while (performance.now() < end) {
      const v = await fn(i % KEYS);
      if (!v || v.id !== i % KEYS) throw new Error(`wrong value for ${i % KEYS}`);
      ops++;
      i += 7;
    }
  }));
  const cu = process.cpuUsage(c0);
  if (!cpu.has(fn)) cpu.set(fn, []);
  cpu.get(fn).push((cu.user + cu.system) / ops);
  return (ops * 1000) / ROUND_MS;
}

const results = Object.fromEntries(Object.keys(peers).map((k) => [k, []]));
for (const fn of Object.values(peers)) await round(fn); // warm-up
for (let r = 0; r < ROUNDS; r++) for (const [name, fn] of Object.entries(peers)) results[name].push(await round(fn));
const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
const base = median(results['plain GET + JSON.parse']);
console.log(`warm hits, ${KEYS} keys of ~${Math.round(bytesJSON / KEYS)} B JSON, ${CALLERS} concurrent callers, ${ROUNDS} interleaved rounds of ${ROUND_MS} ms, median ops/s`);
// CPU per op (this process, user + system) is less sensitive to other jobs on a shared machine than ops/s.
for (const [name, a] of Object.entries(results)) console.log(`  ${name.padEnd(48)} ${Math.round(median(a)).toString().padStart(8)} ops/s  ${(median(a) / base).toFixed(2)}x   ${median(cpu.get(peers[name])).toFixed(1).padStart(5)} µs CPU/op`);
console.log(`loader calls during the warm runs (should be 0): ${loads}`);
// RESULTS_JSON=path writes every round's ops/s per peer (make bench-report reads it).
if (process.env.RESULTS_JSON) (await import('node:fs')).writeFileSync(process.env.RESULTS_JSON, JSON.stringify(results));
console.log(`bytes stored per value (mean): JSON ${Math.round(bytesJSON / KEYS)}, JSON+snappy ${Math.round(bytesSnappy / KEYS)}, kura default (msgpack+s2, header and fields) ${Math.round(bytesKura / KEYS)}`);
plain.disconnect();
plainAP.disconnect();
await store.close();
await keyv.disconnect?.();
await cm.disconnect?.();
await bento.disconnectAll?.();
await redis.stop();
process.exit(0);
