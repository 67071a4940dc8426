// The value format against the files the Go tests read: every vector in
// testdata/format/, every hostile input in testdata/hostile/ (with the heap
// growth of each decode measured), and a fuzz pass over the decoders.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import snappy from 'snappy';
import {
  Codec, parseHeader, encodeEntry, FormatError, fingerprint,
  s2Encode, s2Decode, parseS2Dict, zstdAvailable, checkMsgPack, compareUtf8, decodeMsgPack,
} from '../dist/index.js';
import { rng } from './helpers.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const testdata = path.join(here, '..', '..', 'testdata');
const vectors = JSON.parse(fs.readFileSync(path.join(testdata, 'format', 'vectors.json'), 'utf8'));
const sortedKeyVectors = JSON.parse(fs.readFileSync(path.join(testdata, 'format', 'sorted-keys.json'), 'utf8'));
const schemaVectors = JSON.parse(fs.readFileSync(path.join(testdata, 'format', 'schema.json'), 'utf8'));
const hex = (s) => Buffer.from(s, 'hex');

function fieldsOf(f) {
  const out = {};
  if (f.HasSchema) out.schema = f.Schema;
  if (f.Written && !f.Written.startsWith('0001-')) out.written = Date.parse(f.Written);
  if (f.TTL > 0) out.ttl = f.TTL / 1e6;
  if (f.Cost > 0) out.cost = f.Cost / 1e3;
  if (f.Token) out.token = Buffer.from(f.Token, 'latin1');
  return out;
}

function codecFor(o) {
  const opts = {
    serializer: o.serializer,
    compressor: o.compressor === 's2-better' ? 's2' : o.compressor,
    minCompressSize: o.min_compress_size,
    minSavings: o.min_savings,
    compact: o.compact ?? false,
    keepKeyOrder: o.keep_key_order ?? false,
  };
  if (o.level) opts.zstdLevel = o.level;
  if (o.dictionary) {
    opts.dictionaries = new Map([[o.dictionary, hex(o.dictionary_hex)]]);
    opts.dictionary = o.dictionary;
  }
  return new Codec(opts);
}

function expectedValue(v) {
  // A struct written as an array (serializer 6): the field values in declaration order.
  if (v.header.Serializer === 6) return Object.values(v.value);
  switch (v.kind) {
    case 'bytes':
      return hex(v.value);
    case 'string':
      return v.options.serializer === 'raw' ? Buffer.from(v.value, 'utf8') : v.value;
    default:
      return v.value;
  }
}

function inputValue(v) {
  if (v.header.Serializer === 6) return Object.values(v.value);
  return v.kind === 'bytes' ? hex(v.value) : v.value;
}

// The options a Node writer needs to write vector v: a Go struct written as
// an array (serializer 6) is written from Node as the array of its values.
// A Go struct written with its field names (kind 'record') lists them in
// declaration order, not sorted as a map: the writer keeps the object's order.
function writerOptions(v) {
  if (v.header.Serializer === 6) return { ...v.options, serializer: 'msgpack-array' };
  return v.kind === 'record' ? { ...v.options, keep_key_order: true } : v.options;
}

function checkDecoded(v, got) {
  const want = v.kind === 'negative' || v.kind === 'lease' || v.kind === 'tombstone' ? v.kind : 'value';
  assert.equal(got.kind, want, v.name);
  if (want === 'value') assert.deepEqual(got.value, expectedValue(v), v.name);
  const wf = fieldsOf(v.header.Fields);
  const gf = got.header.fields;
  assert.equal(gf.schema, wf.schema, `${v.name} schema`);
  assert.equal(gf.written, wf.written, `${v.name} written`);
  assert.equal(gf.ttl, wf.ttl, `${v.name} ttl`);
  assert.equal(gf.cost, wf.cost, `${v.name} cost`);
  assert.deepEqual(gf.token && Buffer.from(gf.token), wf.token, `${v.name} token`);
  if (want === 'value') {
    assert.equal(got.header.serializer, v.header.Serializer, v.name);
    assert.equal(got.header.compressor, v.header.Compressor, v.name);
    assert.equal(got.header.dict, v.header.Dict, v.name);
    assert.equal(got.header.rawLen, v.header.RawLen, v.name);
  }
  assert.equal(got.header.len, v.header.Len, `${v.name} header length`);
}

test('vectors: every version 3, 2 and 1 entry decodes to its value and fields', () => {
  for (const v of [...vectors.vectors, ...vectors.version1]) {
    const c = v.options.dictionary ? codecFor(v.options) : new Codec({ dictionaries: {} });
    checkDecoded(v, c.decode(hex(v.hex)));
  }
});

test('vectors: a Node writer produces the same envelope (exact) or the same header and payload', () => {
  for (const v of vectors.vectors) {
    const want = hex(v.hex);
    let got;
    if (['negative', 'lease', 'tombstone'].includes(v.kind)) {
      got = encodeEntry(v.kind, fieldsOf(v.fields));
    } else {
      got = codecFor(writerOptions(v)).encode(inputValue(v), fieldsOf(v.fields));
    }
    if (v.exact_payload) {
      assert.equal(got.toString('hex'), v.hex, v.name);
      continue;
    }
    const hl = v.header.Len;
    assert.equal(got.subarray(0, hl).toString('hex'), want.subarray(0, hl).toString('hex'), `${v.name}: header`);
    // Our compressed payload decodes to the same value, with our reader and with Go's bytes.
    const c = codecFor(v.options);
    assert.deepEqual(c.decode(got).value, expectedValue(v), `${v.name}: round trip`);
    if (v.options.compressor === 's2' || v.options.compressor === 's2-better') {
      // Compressor id 1 is plain Snappy: the napi-rs snappy library reads ours.
      const ours = snappy.uncompressSync(got.subarray(hl), { asBuffer: true });
      const gos = snappy.uncompressSync(want.subarray(hl), { asBuffer: true });
      assert.deepEqual(ours, gos, `${v.name}: payload`);
    }
  }
});

test('vectors: dictionary values from before the digest field still decode', () => {
  assert.ok(vectors.pre_digest.length > 0);
  for (const v of vectors.pre_digest) {
    const got = codecFor(v.options).decode(hex(v.hex));
    assert.deepEqual(got.value, expectedValue(v), v.name);
    assert.equal(got.header.fields.dictDigest, undefined, v.name);
  }
});

test('vectors: a forged dictionary with the same 28-bit id is refused by its digest', () => {
  assert.ok(vectors.forged_dictionary.length > 0);
  for (const v of vectors.forged_dictionary) {
    const real = new Codec({ compressor: 'zstd', dictionaries: new Map([[v.dictionary, hex(v.real_dictionary_hex)]]) });
    assert.deepEqual(real.decode(hex(v.hex)).value, v.value, v.name);
    const forged = new Codec({ compressor: 'zstd', dictionaries: new Map([[v.dictionary, hex(v.forged_dictionary_hex)]]) });
    assert.throws(() => forged.decode(hex(v.hex)), (e) => e.code === v.error, v.name);
    // Without the digest, the forgery decodes: the attack the field stops.
    assert.deepEqual(forged.decode(hex(v.pre_digest_hex)).value, v.forged_value, `${v.name}: pre-digest`);
  }
});

test('malformed and not-understood entries fail with the Go sentinel', () => {
  const c = new Codec();
  for (const v of vectors.malformed) {
    assert.throws(() => c.decode(hex(v.hex)), (e) => e instanceof FormatError && e.code === v.error && !e.notUnderstood, v.name);
  }
  for (const v of vectors.not_understood) {
    assert.throws(() => c.decode(hex(v.hex)), (e) => e instanceof FormatError && e.notUnderstood, v.name);
    assert.throws(() => c.decode(hex(v.hex)), (e) => e.code === v.error || (v.error === 'ErrNotUnderstood' && e.code === 'ErrNotUnderstood'), v.name);
  }
});

test('schema fingerprints: the Go grammar hashes to the Go fingerprint', () => {
  for (const f of schemaVectors.fingerprints) {
    assert.equal(fingerprint(f.description).toString(16).padStart(8, '0'), f.fingerprint, f.type);
  }
  const c = new Codec();
  for (const e of schemaVectors.evolution) {
    const d = c.decode(hex(e.hex));
    assert.equal(d.kind, 'value', e.name);
  }
});

function readHexFile(p) {
  const text = fs.readFileSync(p, 'utf8');
  return Buffer.from(text.split('\n').filter((l) => !l.trim().startsWith('#')).join('').replace(/\s+/g, ''), 'hex');
}

function hostile() {
  const dir = path.join(testdata, 'hostile');
  const out = new Map();
  for (const f of fs.readdirSync(dir).filter((f) => f.endsWith('.hex')).sort()) out.set(f, readHexFile(path.join(dir, f)));
  // The generated bombs of the Go hostile test (too big to check in).
  const env = (ser, comp, raw, payload) => Buffer.concat([Buffer.from([0xc1, 0x4b, 0x01, ser, comp, 0x00, ...uvarint(raw)]), payload]);
  const tiny = Buffer.concat([Buffer.from([0xdd, 0x00, 0x04, 0x00, 0x00]), Buffer.alloc(3 << 18).fill(Buffer.from([0x81, 0xa0, 0xc0]))]);
  const nested = Buffer.concat([Buffer.from([0xdd, 0x00, 0x04, 0x00, 0x00]), Buffer.alloc(7 << 18).fill(Buffer.from([0x81, 0xa0, 0x81, 0xa0, 0x81, 0xa0, 0xc0]))]);
  const deep = Buffer.concat([Buffer.alloc(1 << 20, 0x91), Buffer.from([0xc0])]);
  out.set('array of 256Ki one-pair maps', env(1, 0, tiny.length, tiny));
  out.set('array of 256Ki 3-level maps', env(1, 0, nested.length, nested));
  out.set('1 MiB of nested one-element arrays', env(1, 0, deep.length, deep));
  return out;
}

function uvarint(x) {
  const o = [];
  while (x >= 0x80) {
    o.push((x & 0x7f) | 0x80);
    x = Math.floor(x / 128);
  }
  o.push(x);
  return o;
}

test('hostile inputs: refused (or decoded, for the honest one) with heap growth under 1 MiB', { skip: typeof globalThis.gc !== 'function' && 'run with --expose-gc' }, () => {
  const c = new Codec();
  for (const [name, b] of hostile()) {
    // Warm up once so lazily compiled code does not count as growth, then
    // take the least of three measurements: what the decode itself
    // allocates shows in every one, a stray allocation by the test runner
    // between two samples does not.
    try { c.decode(b); } catch { /* expected */ }
    let grew = Infinity;
    let result;
    for (let i = 0; i < 3; i++) {
      globalThis.gc();
      globalThis.gc();
      const before = process.memoryUsage();
      try {
        result = c.decode(b);
      } catch (e) {
        result = e;
      }
      const after = process.memoryUsage();
      grew = Math.min(grew, (after.heapUsed - before.heapUsed) + (after.arrayBuffers - before.arrayBuffers));
    }
    assert.ok(grew < 1 << 20, `${name}: heap grew ${grew} bytes`);
    if (name === 'honest-small.hex') {
      assert.deepEqual(result.value, [1, 'a', {}], name);
    } else {
      assert.ok(result instanceof FormatError, `${name}: want a FormatError, got ${result?.value === undefined ? result : 'a value'}`);
      assert.ok(result.malformed, name);
    }
  }
});

test('zstd: the WebAssembly libzstd is loaded (no garbage fallback)', () => {
  assert.equal(zstdAvailable(), true);
});

function randomData(r, n) {
  const b = Buffer.alloc(n);
  const mode = Math.floor(r() * 3);
  for (let i = 0; i < n; i++) {
    if (mode === 0) b[i] = Math.floor(r() * 256);
    else if (mode === 1) b[i] = 97 + Math.floor(r() * 4);
    else b[i] = i > 8 && r() < 0.7 ? b[i - 1 - Math.floor(r() * 8)] : Math.floor(r() * 256);
  }
  return b;
}

test('fuzz: s2 and s2-dict round trip, agree with snappy, and never crash on mutated blocks', () => {
  const r = rng(20261124);
  const dictContent = randomData(r, 2048);
  const dict = parseS2Dict(Buffer.concat([Buffer.from(uvarint(100)), dictContent]));
  assert.ok(dict);
  let refused = 0;
  for (let iter = 0; iter < 3000; iter++) {
    const n = Math.floor(r() * (iter % 10 === 0 ? 70000 : 600));
    let src = randomData(r, n);
    if (iter % 3 === 0 && n > 32) {
      // Splice dictionary content in so dictionary copies happen.
      const at = Math.floor(r() * (n - 32));
      const from = Math.floor(r() * (dictContent.length - 32));
      dictContent.copy(src, at, from, from + 32);
    }
    const plain = s2Encode(src);
    assert.deepEqual(s2Decode(plain, n), src, `s2 round trip ${iter}`);
    assert.deepEqual(snappy.uncompressSync(plain, { asBuffer: true }), src, `snappy reads ours ${iter}`);
    const theirs = snappy.compressSync(src);
    assert.deepEqual(s2Decode(theirs, n), src, `we read snappy ${iter}`);
    const withDict = s2Encode(src, dict);
    assert.deepEqual(s2Decode(withDict, n, dict), src, `s2-dict round trip ${iter}`);
    // Mutations: flip, cut, extend; the decoder must either produce exactly n bytes or throw S2's corrupt error.
    for (const block of [plain, withDict]) {
      const m = Buffer.from(block);
      const k = 1 + Math.floor(r() * 4);
      for (let j = 0; j < k && m.length; j++) m[Math.floor(r() * m.length)] ^= 1 << Math.floor(r() * 8);
      const cut = m.subarray(0, Math.floor(r() * m.length));
      for (const x of [m, cut]) {
        try {
          const out = s2Decode(x, n, block === withDict ? dict : undefined);
          assert.equal(out.length, n);
        } catch (e) {
          assert.equal(e.name, 'S2CorruptError', String(e));
          refused++;
        }
      }
    }
  }
  assert.ok(refused > 0);
});

test('fuzz: the envelope decoder never throws anything but FormatError on random and mutated entries', () => {
  const r = rng(7);
  const c = new Codec({ dictionaries: new Map([[5, Buffer.concat([Buffer.from([0]), randomData(r, 64)])]]) });
  const seeds = [...vectors.vectors, ...vectors.version1, ...vectors.malformed, ...vectors.not_understood].map((v) => hex(v.hex));
  for (const b of hostile().values()) if (b.length < 4096) seeds.push(b);
  let decoded = 0;
  for (let iter = 0; iter < 20000; iter++) {
    let b;
    if (iter % 4 === 0) {
      b = Buffer.concat([Buffer.from([0xc1, 0x4b, 1 + Math.floor(r() * 3)]), randomData(r, Math.floor(r() * 64))]);
    } else {
      const s = seeds[Math.floor(r() * seeds.length)];
      b = Buffer.from(s);
      const k = 1 + Math.floor(r() * 3);
      for (let j = 0; j < k && b.length > 2; j++) {
        const at = 2 + Math.floor(r() * (b.length - 2));
        const op = Math.floor(r() * 3);
        if (op === 0) b[at] = Math.floor(r() * 256);
        else if (op === 1) b = b.subarray(0, at);
        else b = Buffer.concat([b.subarray(0, at), randomData(r, 1 + Math.floor(r() * 8)), b.subarray(at)]);
      }
    }
    try {
      c.decode(b);
      decoded++;
    } catch (e) {
      assert.ok(e instanceof FormatError, `iteration ${iter} (${b.toString('hex')}): ${e?.stack ?? e}`);
    }
  }
  assert.ok(decoded > 0);
});

test('fuzz: checkMsgPack never lets through what the msgpack decoder would choke on by allocation', () => {
  const r = rng(99);
  for (let iter = 0; iter < 5000; iter++) {
    const b = randomData(r, 1 + Math.floor(r() * 32));
    try {
      checkMsgPack(b);
    } catch (e) {
      assert.ok(e instanceof FormatError && e.code === 'ErrBomb');
    }
  }
});

test('entries without a value round trip with their fields', () => {
  const token = Buffer.from('0123456789abcdef');
  for (const kind of ['negative', 'lease', 'tombstone']) {
    const b = encodeEntry(kind, { written: 1_700_000_000_123, ttl: 5000, token });
    const h = parseHeader(b);
    assert.equal(h.kind, kind);
    assert.equal(h.fields.written, 1_700_000_000_123);
    assert.equal(h.fields.ttl, 5000);
    assert.deepEqual(Buffer.from(h.fields.token), token);
  }
  assert.equal(encodeEntry('negative').toString('hex'), 'c14b020100');
});

test('every serializer and compressor round trips, zstd with a zstd dictionary too', () => {
  const rec = { id: 7, name: 'x'.repeat(300), tags: ['a', 'b'], when: new Date(1_700_000_000_000) };
  for (const compressor of ['none', 's2', 'zstd']) {
    for (const serializer of ['msgpack', 'json']) {
      const c = new Codec({ serializer, compressor });
      const got = c.decode(c.encode(rec)).value;
      assert.deepEqual(got, serializer === 'json' ? JSON.parse(JSON.stringify(rec)) : rec);
    }
  }
  const raw = new Codec({ serializer: 'raw' });
  assert.deepEqual(raw.decode(raw.encode('héllo'.repeat(100))).value, Buffer.from('héllo'.repeat(100)));
  const ids = new Codec({ serializer: 'idlist' });
  const list = [1, 2, 3, 1000, 5, -7, 2 ** 40];
  assert.deepEqual(ids.decode(ids.encode(list)).value, list);
  const sd = Buffer.concat([Buffer.from([0]), Buffer.from('the quick brown fox jumps over the lazy dog '.repeat(10))]);
  const s2d = new Codec({ compressor: 's2-dict', dictionaries: { 9: sd }, dictionary: 9, serializer: 'raw' });
  const text = 'the quick brown fox jumps over the lazy dog, again and again '.repeat(8);
  const enc = s2d.encode(text);
  assert.equal(parseHeader(enc).compressor, 3);
  assert.equal(s2d.decode(enc).value.toString(), text);
});

test('sorted keys: a Node writer writes a document\'s maps as Go does (UTF-8 byte order), and keeps the order only when asked', () => {
  assert.ok(sortedKeyVectors.vectors.length >= 3);
  const c = new Codec();
  const plain = new Codec({ keepKeyOrder: true });
  for (const v of sortedKeyVectors.vectors) {
    const doc = JSON.parse(v.json);
    assert.equal(Buffer.from(c.serialize(doc)).toString('hex'), v.hex, v.name);
    // The whole entry too (compressed or not): the payload is the same bytes.
    assert.deepEqual(c.decode(c.encode(doc)).value, decodeMsgPack(hex(v.hex)), v.name);
    // Insertion order differs from byte order in every vector (integer-like
    // keys first, UTF-16 order for the emoji): the option is the old bytes.
    assert.notEqual(Buffer.from(plain.serialize(doc)).toString('hex'), v.hex, `${v.name}: keepKeyOrder`);
  }
  // The comparator on its own: code point order, not UTF-16 code units.
  const keys = ['😀', '\ue000', 'ｱ', 'a', '10', '9', '', 'a\u0000', 'é'];
  assert.deepEqual([...keys].sort(compareUtf8), ['', '10', '9', 'a', 'a\u0000', 'é', '\ue000', 'ｱ', '😀']);
});

test('fuzz: sorted keys: the bytes do not depend on the order keys were inserted, and decode to the value', () => {
  const r = rng(20261125);
  const alphabet = ['a', 'b', 'B', '0', '1', '9', '10', 'é', 'ｱ', '\ue000', '😀', '\u0000', '寿'];
  const key = () => Array.from({ length: Math.floor(r() * 4) }, () => alphabet[Math.floor(r() * alphabet.length)]).join('');
  const value = (depth) => {
    const p = r();
    if (depth > 3 || p < 0.3) return [null, true, 'x', 0.5, 7, -3][Math.floor(r() * 6)];
    if (p < 0.5) return Array.from({ length: Math.floor(r() * 4) }, () => value(depth + 1));
    const entries = [];
    for (let i = Math.floor(r() * 20); i > 0; i--) entries.push([key(), value(depth + 1)]);
    return Object.fromEntries(entries);
  };
  // The same entries inserted in another order (integer-like keys still list first).
  const reordered = (v) => {
    if (Array.isArray(v)) return v.map(reordered);
    if (v === null || typeof v !== 'object') return v;
    const entries = Object.entries(v).map(([k, x]) => [k, reordered(x)]);
    for (let i = entries.length - 1; i > 0; i--) {
      const j = Math.floor(r() * (i + 1));
      [entries[i], entries[j]] = [entries[j], entries[i]];
    }
    return Object.fromEntries(entries);
  };
  const c = new Codec();
  for (let iter = 0; iter < 2000; iter++) {
    const v = value(0);
    const b = Buffer.from(c.serialize(v));
    assert.equal(Buffer.from(c.serialize(reordered(v))).toString('hex'), b.toString('hex'));
    assert.deepEqual(decodeMsgPack(b), v);
  }
});

// The field-name rule (docs/FORMAT.md, "Field names"): for each Go type of
// testdata/format/field-names.json, the bytes Go writes decode here to an
// object with the names the rule gives, in declaration order; the same
// object written by Node (keeping its key order) is the same bytes; and a
// Node schema stated with those names hashes to Go's fingerprint.
const fieldNameVectors = JSON.parse(fs.readFileSync(path.join(testdata, 'format', 'field-names.json'), 'utf8'));

test('field names: Go structs by the rule decode to their names, and Node writes the same bytes', () => {
  assert.ok(fieldNameVectors.vectors.length >= 6);
  const c = new Codec({ compressor: 'none', keepKeyOrder: true });
  for (const v of fieldNameVectors.vectors) {
    const got = decodeMsgPack(hex(v.msgpack));
    assert.deepEqual(Object.keys(got), v.fields, `${v.name}: field names in order`);
    assert.deepEqual(got, v.value, v.name);
    const obj = Object.fromEntries(v.fields.map((f) => [f, v.value[f]]));
    const entry = c.encode(obj);
    const payload = entry.subarray(parseHeader(entry).len);
    assert.equal(payload.toString('hex'), v.msgpack, `${v.name}: Node's bytes`);
    assert.equal(fingerprint(v.description).toString(16).padStart(8, '0'), v.fingerprint, `${v.name}: fingerprint`);
  }
});
