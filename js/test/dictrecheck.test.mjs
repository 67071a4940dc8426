// A reader keeps a dictionary read from the store for values without a
// digest (written before digests existed) only while the store vouches for
// it: after dictionaryRecheck it asks again, as Go's codec does after
// DictionaryRecheck. Before, a Node reader kept a forged copy for the life
// of the process (200/200 forged values still decoded 73 s after the real
// one was republished).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Cache, Codec, RedisStore, parseHeader } from '../dist/index.js';
import { dictionaryID } from '../dist/codec.js';
import { startRedis, serverSkip } from './helpers.mjs';

const skip = serverSkip('redis-server');
let server;
let store;
before(async () => {
  if (skip) return;
  server = await startRedis();
  store = new RedisStore({ addr: server.addr });
  await store.ready();
});
after(async () => {
  await store?.close();
  await server?.stop();
});

// withoutDigest returns a version 2 value whose only field is the
// dictionary digest, with that field taken out: a value as writers wrote
// it before digests existed.
function withoutDigest(b) {
  assert.equal(b[4], 18, 'fields: the digest only');
  assert.equal(b[5], 0x06, 'the digest field');
  return Buffer.concat([b.subarray(0, 4), Buffer.from([0]), b.subarray(5 + 18)]);
}

test('a dictionary for values without a digest is rechecked in the store', { skip }, async () => {
  const dict = Buffer.from('{"id":1,"title":"a title","body":"cache me if you can, cache me if you can"}'.repeat(40));
  const id = dictionaryID(dict);
  const writer = new Codec({ compressor: 'zstd', minCompressSize: -1, dictionaries: { [id]: dict }, dictionary: id });
  const v = { id: 1, title: 'a title', body: 'cache me if you can, cache me if you can' };
  const enc = withoutDigest(writer.encode(v));
  const h = parseHeader(enc);
  assert.equal(h.dict, id);
  assert.equal(h.fields.dictDigest, undefined);
  const dkey = store.dictionaryKeys(id)[0];
  await store.client.set('old:1', enc);
  await store.client.set(dkey, dict);

  const reader = new Cache(store, { storeTimeout: 5000, dictionaryRecheck: 300 });
  assert.deepEqual(await reader.get('old:1'), v, 'decoded with the published dictionary');
  // The published copy is replaced (by a forger, or unpublished): within the
  // recheck the copy held is used, after it the store is asked again.
  await store.client.set(dkey, Buffer.from('other bytes, another dictionary id altogether'));
  assert.deepEqual(await reader.get('old:1'), v, 'within the recheck');
  await sleep(400);
  assert.equal(await reader.get('old:1'), undefined, 'after the recheck the store no longer vouches for it: a miss');
  // Values that carry a digest are checked against it on every read and are
  // not rechecked (the digest is the check).
});
