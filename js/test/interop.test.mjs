// Go writes -> Node reads and Node writes -> Go reads, for every value kind,
// on a real redis-server and on a pool of 3 memcached servers (the same
// ring and key forms on both sides), with the Go Cache in a separate
// process (internal/harness/nodeinterop).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Cache, Codec, RedisStore, MemcacheStore, schema, parseHeader } from '../dist/index.js';
import { startRedis, startMemcachedPool, runInterop, serverSkip } from './helpers.mjs';

// Go's Article as a Node writer describes it (docs/FORMAT.md "The fingerprint").
const articleSchema = schema.struct([
  ['id', schema.int], ['name', schema.string], ['tags', schema.list(schema.string)], ['body', schema.string], ['at', schema.custom('time.Time')],
]);

const codecs = {
  'record-json': () => new Codec({ serializer: 'json' }),
  'record-zstd': () => new Codec({ compressor: 'zstd', minCompressSize: -1 }),
  raw: () => new Codec({ serializer: 'raw' }),
  idlist: () => new Codec({ serializer: 'idlist' }),
};
const codecFor = (kind) => (codecs[kind] ?? (() => new Codec()))();

// A JSON view of a decoded value, comparable with what Go prints.
function plain(v) {
  if (Buffer.isBuffer(v)) return { bytes: v.toString('hex') };
  return JSON.parse(JSON.stringify(v));
}

// The field-name rule (docs/FORMAT.md, "Field names"): a product as a
// Node developer writes it, and as Node reads each Go struct: json and
// msgpack tags name the fields id, name, price; an untagged struct's
// fields keep their Go names.
const product = { id: 1, name: 'lamp', price: 9.5 };
const productFromGo = { 'product-json': product, 'product-msgpack': product, 'product-untagged': { ID: 1, Name: 'lamp', Price: 9.5 } };

function fromGo(kind, v) {
  // Node's value for a kind Go described in JSON.
  if (kind.startsWith('product-')) return { ...product }; // written the Node way, for every Go struct
  if (v && typeof v === 'object' && 'bytes' in v) return Buffer.from(v.bytes, 'hex');
  if (kind === 'time') return new Date(v);
  if (kind.startsWith('record') && kind !== 'record-json') return { ...v, at: new Date(v.at) };
  return v;
}

const backends = [
  { name: 'redis', bin: 'redis-server', start: async () => {
    const r = await startRedis();
    const store = new RedisStore({ addr: r.addr });
    await store.ready();
    return { addr: r.addr, store, stop: r.stop };
  } },
  { name: 'memcached (3 servers)', bin: 'memcached', start: async () => {
    const p = await startMemcachedPool(3);
    return { addr: p.addr, store: new MemcacheStore({ servers: p.servers }), stop: p.stop };
  } },
];

for (const backend of backends) describe(`interop on ${backend.name}`, () => {
const skip = serverSkip(backend.bin);
let server;
let store;
const redis = { get addr() { return server.addr; } };

before(async () => {
  if (skip) return;
  server = await backend.start();
  store = server.store;
});
after(async () => {
  await store?.close();
  await server?.stop();
});

test('Go writes, Node reads: every value kind', { skip }, async () => {
  const wrote = runInterop('write', redis.addr, 'go:');
  assert.equal(Object.keys(wrote).length, 17);
  for (const [key, want] of Object.entries(wrote)) {
    assert.ok(!(want && want.error), `${key}: Go failed: ${want?.error}`);
    const kind = key.slice(3);
    const c = new Cache(store, { storeTimeout: 5000, codec: codecFor(kind), schema: kind.startsWith('record') ? articleSchema : undefined });
    if (kind === 'negative') {
      let called = 0;
      const v = await c.fetch(key, async () => { called++; return 'loaded'; });
      assert.equal(v, undefined, key);
      assert.equal(called, 0, `${key}: a cached "not found" must not call the loader`);
      assert.equal(c.stats().negativeHits, 1);
      continue;
    }
    const got = await c.get(key);
    if (kind.startsWith('product-')) {
      assert.deepEqual(got, productFromGo[kind], `${key}: field names as the rule gives them`);
      continue;
    }
    assert.deepEqual(plain(got), plain(fromGo(kind, want)), key);
    if (kind.startsWith('record')) assert.equal(c.stats().schemaMismatches, 0, `${key}: same fingerprint as Go`);
  }
});

test('Node writes, Go reads: every value kind', { skip }, async () => {
  const expected = runInterop('write', redis.addr, 'expect:');
  for (const [ekey, want] of Object.entries(expected)) {
    const kind = ekey.slice('expect:'.length);
    const key = `node:${kind}`;
    const c = new Cache(store, { storeTimeout: 5000, codec: codecFor(kind), schema: kind.startsWith('record') ? articleSchema : undefined, ttl: 60_000 });
    if (kind === 'negative') {
      assert.equal(await c.fetch(key, async () => undefined), undefined);
      continue;
    }
    await c.set(key, fromGo(kind, want));
  }
  const read = runInterop('read', redis.addr, 'node:');
  for (const [key, got] of Object.entries(read)) {
    const kind = key.slice('node:'.length);
    const want = kind === 'negative' ? 'not found' : expected[`expect:${kind}`];
    assert.deepEqual(got, want, `${key}: Go read ${JSON.stringify(got)}`);
  }
});

// Node looks dictionaries up on Redis only (docs/node.md, Limits).
if (backend.name === 'redis') test('Go writes with dictionaries published by dictstore (zstd and s2-dict); a Node reader with none finds them in the store', { skip }, async () => {
  const wrote = runInterop('dictwrite', redis.addr, 'dict:');
  const c = new Cache(store, { schema: articleSchema, storeTimeout: 5000 });
  for (const [key, want] of Object.entries(wrote)) {
    const raw = await store.client.getBuffer(key);
    const h = parseHeader(raw);
    assert.ok(h.dict !== 0, `${key}: written with a dictionary`);
    assert.equal(h.compressor, key.endsWith('zstd-dict') ? 2 : 3, key);
    assert.ok(h.fields.dictDigest, `${key}: carries the dictionary digest`);
    const got = await c.get(key);
    assert.deepEqual(plain(got), plain(fromGo('record', want)), key);
  }
  assert.equal(c.stats().decodeErrors, 0);
  // fetch takes the same path: a hit, the loader never runs.
  const viaFetch = new Cache(store, { storeTimeout: 5000 });
  for (const key of Object.keys(wrote)) assert.equal((await viaFetch.fetch(key, async () => { throw new Error('must hit'); })).id, 7);
  // A forged copy under the same key is refused: overwrite the published
  // dictionary with other bytes and read with a fresh codec.
  const k = (await store.client.keys('kura:dict:*'))[0];
  await store.client.set(k, Buffer.from('forged dictionary bytes, long enough to be one'));
  const fresh = new Cache(store, { storeTimeout: 5000 });
  let miss = 0;
  for (const key of Object.keys(wrote)) if ((await fresh.get(key)) === undefined) miss++;
  assert.equal(miss, 1, 'the value whose dictionary was replaced is a miss, never garbage');
});
});
