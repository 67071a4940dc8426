// Published schemas (docs/FORMAT.md, "Published schemas"): the vectors Go
// writes in testdata/format/named.json, a Cache with namedFields on a real
// redis-server (published, unpublished and forged schemas), and a fuzz
// pass over parseSchema and named.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  Cache, Codec, RedisStore, parseHeader, fingerprint, parseSchema, named, SchemaError, decodeMsgPack,
  MAX_SCHEMA_DEPTH,
} from '../dist/index.js';
import { rng, startRedis, serverSkip } from './helpers.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const vectors = JSON.parse(fs.readFileSync(path.join(here, '..', '..', 'testdata', 'format', 'named.json'), 'utf8'));
const hex = (s) => Buffer.from(s, 'hex');

/** JSON with object keys sorted (Go's encoding/json order), Uint8Array as base64 like Go's []byte. */
function canon(v) {
  if (v instanceof Uint8Array) return JSON.stringify(Buffer.from(v).toString('base64'));
  if (Array.isArray(v)) return `[${v.map(canon).join(',')}]`;
  if (v !== null && typeof v === 'object') return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canon(v[k])}`).join(',')}}`;
  return JSON.stringify(v);
}

test('named vectors: Go entries, parsed and named as Go names them', () => {
  const codec = new Codec();
  assert.ok(vectors.named.length >= 3);
  for (const v of vectors.named) {
    const fp = parseInt(v.fingerprint, 16) >>> 0;
    assert.equal(fingerprint(v.description), fp, v.name);
    const d = codec.decode(hex(v.entry));
    assert.equal(d.header.fields.schema, fp, v.name);
    const got = named(parseSchema(v.description), d.value);
    assert.equal(canon(got), canon(v.value), v.name);
  }
});

test('descriptions Go refuses are refused', () => {
  for (const d of vectors.refused_descriptions) assert.throws(() => parseSchema(d), SchemaError, JSON.stringify(d));
  assert.throws(() => parseSchema('x'.repeat(64 * 1024 + 1)), SchemaError);
  assert.throws(() => parseSchema('[]'.repeat(MAX_SCHEMA_DEPTH + 2) + 'int'), SchemaError);
  for (const d of ['int', 'any', '{}', '{"a":@0}', 'custom(time.Time)', 'custom(p.G[func()])', 'invalid(chan)', 'map[int][]{"x":bytes}', '{"\\u00e9\\x41":int}']) parseSchema(d);
  assert.equal(parseSchema('{"\\u00e9\\x41":int}').fields[0].name, 'éA');
});

test('values of another shape than their schema are refused, never named', () => {
  for (const m of vectors.mismatches) {
    assert.throws(() => named(parseSchema(m.description), decodeMsgPack(hex(m.payload))), SchemaError, `${m.description} ${m.payload}`);
  }
  // A field named __proto__ is refused as the msgpack decoder refuses such a key.
  assert.throws(() => named(parseSchema('{"__proto__":int}'), [1]), SchemaError);
  assert.deepEqual(named(parseSchema('{"a":int,"b":[]string}'), [1, null]), { a: 1, b: null });
});

test('hostile schemas (testdata/hostile/schema-descriptions.json): refused as Go refuses them', () => {
  const h = JSON.parse(fs.readFileSync(path.join(here, '..', '..', 'testdata', 'hostile', 'schema-descriptions.json'), 'utf8'));
  assert.ok(h.refuse_descriptions.length >= 5);
  for (const d of h.refuse_descriptions) assert.throws(() => parseSchema(d), SchemaError, JSON.stringify(d).slice(0, 80));
  for (const n of h.refuse_to_name) assert.throws(() => named(parseSchema(n.description), decodeMsgPack(hex(n.payload))), SchemaError, n.why);
});

test('fuzz: parseSchema and named throw only SchemaError', () => {
  const r = rng(24);
  const seeds = [...vectors.named.map((v) => v.description), ...vectors.refused_descriptions, '{"n":@0,"v":map[string][]{"x":custom(a(b)c)}}'];
  const alphabet = '{}[]():,@"\\0123456789abcdefgimnprstuxyz ';
  const values = [null, 1, 1.5, 'x', true, [], [1], [[1, 'x']], { a: 1 }, new Uint8Array([1]), [[null, [1, 2]], 3]];
  for (let n = 0; n < 6000; n++) {
    let d = seeds[Math.floor(r() * seeds.length)];
    const edits = 1 + Math.floor(r() * 4);
    for (let e = 0; e < edits; e++) {
      const at = Math.floor(r() * (d.length + 1));
      const op = r();
      if (op < 0.4) d = d.slice(0, at) + alphabet[Math.floor(r() * alphabet.length)] + d.slice(at);
      else if (op < 0.8) d = d.slice(0, at) + d.slice(at + 1);
      else d = d.slice(0, at) + d.slice(at, at + 8) + d.slice(at);
    }
    let s;
    try {
      s = parseSchema(d);
    } catch (err) {
      assert.ok(err instanceof SchemaError, `${JSON.stringify(d)}: ${err}`);
      continue;
    }
    for (const v of values) {
      try {
        named(s, v);
      } catch (err) {
        assert.ok(err instanceof SchemaError, `${JSON.stringify(d)} on ${canon(v)}: ${err}`);
      }
    }
  }
});

describe('a Cache with namedFields on a redis-server', { skip: serverSkip() }, () => {
  let r, store;
  before(async () => {
    r = await startRedis();
    store = new RedisStore({ addr: r.addr });
    await store.ready();
  });
  after(async () => {
    await store?.close();
    await r?.stop();
  });

  test('published: Go structs come back with field names; unpublished or forged: not understood, never overwritten', async () => {
    const v = vectors.named[0];
    const fp = parseInt(v.fingerprint, 16) >>> 0;
    const entry = hex(v.entry);
    await store.client.set('item:1', entry);
    const plain = new Cache(store);
    assert.ok(Array.isArray(await plain.get('item:1')), 'without namedFields: the arrays, as before');

    // Not published yet: not understood, and a fetch leaves the entry alone.
    const c = new Cache(store, { namedFields: true, storeTimeout: 5000 });
    assert.equal(await c.get('item:1'), undefined);
    assert.deepEqual(await c.fetch('item:1', async () => ({ loaded: true })), { loaded: true });
    assert.ok(c.stats().notUnderstood >= 1);
    assert.ok(Buffer.from(await store.client.getBuffer('item:1')).equals(entry), 'the Go entry is not overwritten');

    // Published (as Go's dictstore writes it): named.
    await store.client.set(`kura:schema:${v.fingerprint}`, v.description);
    const c2 = new Cache(store, { namedFields: true, storeTimeout: 5000 });
    assert.equal(canon(await c2.get('item:1')), canon(v.value));
    const many = await c2.fetchMany(['item:1'], async () => new Map());
    assert.equal(canon(many.get('item:1')), canon(v.value));

    // A forged description (does not hash to the fingerprint): not used.
    await store.client.set(`kura:schema:${v.fingerprint}`, '{"password":int}');
    const c3 = new Cache(store, { namedFields: true, storeTimeout: 5000 });
    assert.equal(await c3.get('item:1'), undefined);
    assert.ok(c3.stats().notUnderstood >= 1);
    assert.equal(fingerprint('{"password":int}') === fp, false);
  });
});
