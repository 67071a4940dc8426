// kura's msgpack decoder (the hit path's): cross-checked against two
// independent implementations on random values, fuzzed with mutated
// payloads, and held to what a cache reader needs (no prototype pollution,
// no views of a scratch buffer, no JavaScript-only extensions).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Encoder } from '@msgpack/msgpack';
import { Packr, Unpackr } from 'msgpackr';
import { Codec, decodeMsgPack, MsgPackError, checkMsgPack, FormatError } from '../dist/index.js';
import { rng } from './helpers.mjs';


const alphabet = ['a', 'b', 'z', 'é', '日本', '😀', ' ', 'id', 'name', '0'];
function randomString(r) {
  const n = Math.floor(r() * (r() < 0.1 ? 400 : 20));
  let s = '';
  for (let i = 0; i < n; i++) s += alphabet[Math.floor(r() * alphabet.length)];
  return s;
}

function randomValue(r, depth = 0) {
  const k = Math.floor(r() * (depth > 3 ? 8 : 10));
  switch (k) {
    case 0: return null;
    case 1: return r() < 0.5;
    case 2: return Math.floor(r() * 256) - 128;
    case 3: return Math.floor((r() - 0.5) * 2 ** (1 + Math.floor(r() * 52)));
    case 4: return (r() - 0.5) * 1e6;
    case 5: return randomString(r);
    case 6: return Buffer.from(randomString(r));
    case 7: return new Date(Math.floor(r() * 4e12));
    case 8: return Array.from({ length: Math.floor(r() * 6) }, () => randomValue(r, depth + 1));
    default: {
      const o = {};
      const n = Math.floor(r() * 8);
      for (let i = 0; i < n; i++) o[randomString(r) || 'k'] = randomValue(r, depth + 1);
      return o;
    }
  }
}

// Buffers come back as Buffers; Uint8Arrays from other decoders compare by content.
const norm = (v) => {
  if (v instanceof Uint8Array) return { bin: Buffer.from(v).toString('hex') };
  if (v instanceof Date) return { date: v.getTime() };
  if (Array.isArray(v)) return v.map(norm);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, norm(x)]));
  return v;
};

test('decodeMsgPack reads what @msgpack/msgpack and msgpackr write, as msgpackr reads it', () => {
  const r = rng(2026);
  const enc = new Encoder({ ignoreUndefined: false });
  const packr = new Packr({ useRecords: false, variableMapSize: true });
  const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: 'number' });
  for (let i = 0; i < 3000; i++) {
    const v = randomValue(r);
    for (const b of [enc.encode(v), packr.pack(v)]) {
      const got = decodeMsgPack(b);
      assert.deepEqual(norm(got), norm(v), `value ${i}`);
      assert.deepEqual(norm(got), norm(unpackr.unpack(b)), `value ${i} vs msgpackr`);
    }
  }
});

test('decodeMsgPack: 64-bit integers, float32, the three timestamp sizes', () => {
  assert.equal(decodeMsgPack(Buffer.from('cf0000000100000002', 'hex')), 2 ** 32 + 2);
  assert.equal(decodeMsgPack(Buffer.from('d3ffffffffffffffff', 'hex')), -1);
  assert.equal(decodeMsgPack(Buffer.from('d3fffffffeffffffff', 'hex')), -(2 ** 32) - 1);
  assert.equal(decodeMsgPack(Buffer.from('ca3fc00000', 'hex')), 1.5);
  assert.equal(decodeMsgPack(Buffer.from('d6ff00000001', 'hex')).getTime(), 1000);
  const t8 = Buffer.from('d7ff' + (((500_000_000 << 2) >>> 0).toString(16).padStart(8, '0')) + '00000002', 'hex');
  assert.equal(decodeMsgPack(t8).getTime(), 2500);
  const t12 = Buffer.from('c70cff' + '00000000' + 'ffffffffffffffff', 'hex');
  assert.equal(decodeMsgPack(t12).getTime(), -1000);
});

test('decodeMsgPack: a "__proto__" key is an own property, never the prototype', () => {
  const b = new Encoder().encode(JSON.parse('{"__proto__":{"polluted":true},"a":1}'));
  const o = decodeMsgPack(b);
  assert.equal(Object.getPrototypeOf(o), Object.prototype);
  assert.equal(o.polluted, undefined);
  assert.deepEqual(Object.keys(o), ['__proto__', 'a']);
  assert.equal({}.polluted, undefined);
});

test('decodeMsgPack: extension types other than the timestamp are errors, not JavaScript objects', () => {
  // msgpackr reads type 0x73 as a Set and 0x78 as a RegExp; a Go writer never meant that.
  for (const hex of ['d47300', 'd57800c0', 'c70142ff']) {
    assert.throws(() => decodeMsgPack(Buffer.from(hex, 'hex')), MsgPackError);
  }
});

test('bin values do not alias the codec\'s scratch buffer', () => {
  const c = new Codec({ minCompressSize: 1 });
  const a = c.encode({ blob: Buffer.alloc(600, 1), pad: 'x'.repeat(600) });
  const b = c.encode({ blob: Buffer.alloc(600, 2), pad: 'y'.repeat(600) });
  const first = c.decode(a).value;
  c.decode(b);
  assert.ok(first.blob.equals(Buffer.alloc(600, 1)));
});

test('fuzz: mutated payloads decode or throw MsgPackError, nothing else', () => {
  const r = rng(77);
  const enc = new Encoder();
  let refused = 0;
  for (let i = 0; i < 8000; i++) {
    const b = Buffer.from(enc.encode(randomValue(r)));
    const k = 1 + Math.floor(r() * 3);
    let m = b;
    for (let j = 0; j < k && m.length > 0; j++) {
      const at = Math.floor(r() * m.length);
      const op = Math.floor(r() * 3);
      if (op === 0) m[at] = Math.floor(r() * 256);
      else if (op === 1) m = m.subarray(0, at);
      else m = Buffer.concat([m.subarray(0, at), Buffer.from([Math.floor(r() * 256)]), m.subarray(at)]);
    }
    try {
      checkMsgPack(m);
    } catch (e) {
      assert.ok(e instanceof FormatError && e.code === 'ErrBomb', String(e));
    }
    // Even without the walk: its own checks refuse every lie before allocating.
    try {
      decodeMsgPack(m);
    } catch (e) {
      assert.ok(e instanceof MsgPackError, `${m.toString('hex')}: ${e?.stack ?? e}`);
      refused++;
    }
  }
  assert.ok(refused > 0);
});
