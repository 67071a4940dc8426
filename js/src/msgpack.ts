/**
 * A msgpack decoder for the hit path: standard msgpack only (the format Go's
 * msgpack/v5 writes), built for speed on the 1 KB records a cache holds.
 *
 * What it returns: maps as plain objects (keys turned into strings, a
 * "__proto__" key as an own property, never the prototype), arrays, strings
 * (invalid UTF-8 becomes U+FFFD), numbers (64-bit integers as the nearest
 * double), bin as a Buffer of its own (never a view of the input, which may
 * be a scratch buffer), and the timestamp extension (-1) as a Date. Any
 * other extension type is an error, as it is for Go's decoder into `any`:
 * msgpackr would read types 0x42, 0x65, 0x69, 0x70, 0x73, ... as its own
 * JavaScript extensions (a Set, a RegExp, an Error), which a Go writer never
 * meant.
 *
 * It trusts no length: every count and length is checked against the bytes
 * left before anything is allocated, and the callers walk the payload with
 * checkMsgPack first (the Go reader's allocation bound and depth limit).
 */

/** Thrown for bytes that are not one msgpack value; the codec turns it into ErrDeserialize. */
export class MsgPackError extends Error {
  override name = 'MsgPackError';
}

const bad = (why: string): never => {
  throw new MsgPackError(why);
};

// Decoder state: decode is synchronous and never re-entered.
let src: Buffer = Buffer.alloc(0);
let pos = 0;
let end = 0;

const fromCharCode = String.fromCharCode;

/**
 * Decodes exactly one msgpack value from b (trailing bytes are an error).
 * b may be a Buffer or any Uint8Array; nothing returned aliases it.
 */
export function decodeMsgPack(b: Uint8Array): unknown {
  src = b instanceof Buffer ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  pos = 0;
  end = src.length;
  try {
    const v = read(0);
    if (pos !== end) bad(`${end - pos} bytes after the value`);
    return v;
  } finally {
    src = empty;
  }
}

const empty = Buffer.alloc(0);

function need(n: number): void {
  if (n > end - pos) bad('ends inside a value');
}

function read(depth: number): unknown {
  if (pos >= end) bad('ends inside a value');
  const c = src[pos++];
  if (c < 0x80) return c;
  if (c < 0x90) return readMap(c & 0x0f, depth);
  if (c < 0xa0) return readArray(c & 0x0f, depth);
  if (c < 0xc0) return readStr(c & 0x1f);
  if (c >= 0xe0) return c - 0x100;
  switch (c) {
    case 0xc0:
      return null;
    case 0xc2:
      return false;
    case 0xc3:
      return true;
    case 0xc4:
      need(1);
      return readBin(src[pos++]);
    case 0xc5:
      need(2);
      pos += 2;
      return readBin(src.readUInt16BE(pos - 2));
    case 0xc6:
      need(4);
      pos += 4;
      return readBin(src.readUInt32BE(pos - 4));
    case 0xc7:
      need(1);
      return readExt(src[pos++]);
    case 0xc8:
      need(2);
      pos += 2;
      return readExt(src.readUInt16BE(pos - 2));
    case 0xc9:
      need(4);
      pos += 4;
      return readExt(src.readUInt32BE(pos - 4));
    case 0xca:
      need(4);
      pos += 4;
      return src.readFloatBE(pos - 4);
    case 0xcb:
      need(8);
      pos += 8;
      return src.readDoubleBE(pos - 8);
    case 0xcc:
      need(1);
      return src[pos++];
    case 0xcd:
      need(2);
      pos += 2;
      return src.readUInt16BE(pos - 2);
    case 0xce:
      need(4);
      pos += 4;
      return src.readUInt32BE(pos - 4);
    case 0xcf:
      need(8);
      pos += 8;
      return src.readUInt32BE(pos - 8) * 4294967296 + src.readUInt32BE(pos - 4);
    case 0xd0:
      need(1);
      pos += 1;
      return src.readInt8(pos - 1);
    case 0xd1:
      need(2);
      pos += 2;
      return src.readInt16BE(pos - 2);
    case 0xd2:
      need(4);
      pos += 4;
      return src.readInt32BE(pos - 4);
    case 0xd3:
      need(8);
      pos += 8;
      return src.readInt32BE(pos - 8) * 4294967296 + src.readUInt32BE(pos - 4);
    case 0xd4:
      return readExt(1);
    case 0xd5:
      return readExt(2);
    case 0xd6:
      return readExt(4);
    case 0xd7:
      return readExt(8);
    case 0xd8:
      return readExt(16);
    case 0xd9:
      need(1);
      return readStr(src[pos++]);
    case 0xda:
      need(2);
      pos += 2;
      return readStr(src.readUInt16BE(pos - 2));
    case 0xdb:
      need(4);
      pos += 4;
      return readStr(src.readUInt32BE(pos - 4));
    case 0xdc:
      need(2);
      pos += 2;
      return readArray(src.readUInt16BE(pos - 2), depth);
    case 0xdd:
      need(4);
      pos += 4;
      return readArray(src.readUInt32BE(pos - 4), depth);
    case 0xde:
      need(2);
      pos += 2;
      return readMap(src.readUInt16BE(pos - 2), depth);
    case 0xdf:
      need(4);
      pos += 4;
      return readMap(src.readUInt32BE(pos - 4), depth);
  }
  return bad('byte 0xc1 is never used');
}

/** Most nesting levels (Go: codec.DefaultMaxDepth; checkMsgPack enforces it first). */
const MAX_DEPTH = 256;

function readArray(n: number, depth: number): unknown[] {
  // Each element takes at least one byte: a count beyond the bytes left is a lie.
  if (n > end - pos) bad(`array of ${n} elements in ${end - pos} bytes`);
  if (depth >= MAX_DEPTH) bad('nested too deep');
  const a = new Array(n);
  for (let i = 0; i < n; i++) a[i] = read(depth + 1);
  return a;
}

function readMap(n: number, depth: number): Record<string, unknown> {
  if (n > (end - pos) / 2) bad(`map of ${n} pairs in ${end - pos} bytes`);
  if (depth >= MAX_DEPTH) bad('nested too deep');
  const o: Record<string, unknown> = {};
  for (let i = 0; i < n; i++) {
    const k = readKey(depth);
    const v = read(depth + 1);
    if (k === '__proto__') Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
    else o[k] = v;
  }
  return o;
}

// Map keys repeat from value to value: a small cache of the strings of
// short keys hands V8 the same string each time, so building an object
// follows the same hidden-class transitions instead of hashing a new string
// per key (msgpackr does the same).
const KEY_SLOTS = 4096;
const keyBytes: (Uint8Array | undefined)[] = new Array(KEY_SLOTS);
const keyStrings: string[] = new Array(KEY_SLOTS);

function cachedKey(n: number): string {
  const start = pos;
  let h = n;
  for (let i = start; i < start + n; i++) h = Math.imul(h ^ src[i], 0x01000193);
  const slot = (h >>> 0) & (KEY_SLOTS - 1);
  const kb = keyBytes[slot];
  if (kb !== undefined && kb.length === n) {
    let same = true;
    for (let i = 0; i < n; i++) {
      if (kb[i] !== src[start + i]) {
        same = false;
        break;
      }
    }
    if (same) {
      pos += n;
      return keyStrings[slot];
    }
  }
  const s = readStr(n);
  keyBytes[slot] = Uint8Array.prototype.slice.call(src, start, start + n); // a copy: src may be a scratch buffer
  keyStrings[slot] = s;
  return s;
}

function readKey(depth: number): string {
  if (pos < end) {
    const c = src[pos];
    if (c >= 0xa0 && c < 0xc0) {
      pos++;
      const n = c & 0x1f;
      if (n > end - pos) bad(`string of ${n} bytes in ${end - pos}`);
      return n <= 16 ? cachedKey(n) : readStr(n);
    }
  }
  const k = read(depth + 1);
  if (typeof k === 'string') return k;
  if (k instanceof Date) return k.toISOString();
  return String(k);
}

function readStr(n: number): string {
  if (n > end - pos) bad(`string of ${n} bytes in ${end - pos}`);
  const start = pos;
  pos += n;
  if (n <= 16) {
    // Short strings (keys, mostly): ASCII in JavaScript, no native call.
    switch (n) {
      case 0:
        return '';
      case 1: {
        const a = src[start];
        if (a < 0x80) return fromCharCode(a);
        break;
      }
      case 2: {
        const a = src[start], b = src[start + 1];
        if ((a | b) < 0x80) return fromCharCode(a, b);
        break;
      }
      case 3: {
        const a = src[start], b = src[start + 1], c = src[start + 2];
        if ((a | b | c) < 0x80) return fromCharCode(a, b, c);
        break;
      }
      case 4: {
        const a = src[start], b = src[start + 1], c = src[start + 2], d = src[start + 3];
        if ((a | b | c | d) < 0x80) return fromCharCode(a, b, c, d);
        break;
      }
      default: {
        let or = 0;
        for (let i = start; i < pos; i++) or |= src[i];
        if (or < 0x80) {
          let s = '';
          for (let i = start; i < pos; i++) s += fromCharCode(src[i]);
          return s;
        }
      }
    }
  }
  return (src as unknown as { utf8Slice(s: number, e: number): string }).utf8Slice(start, pos);
}

function readBin(n: number): Buffer {
  if (n > end - pos) bad(`bin of ${n} bytes in ${end - pos}`);
  const out = Buffer.allocUnsafe(n);
  src.copy(out, 0, pos, pos + n);
  pos += n;
  return out;
}

function readExt(n: number): Date {
  need(1);
  const type = src.readInt8(pos++);
  if (n > end - pos) bad(`extension of ${n} bytes in ${end - pos}`);
  const p = pos;
  pos += n;
  if (type !== -1) return bad(`extension type ${type} (only the timestamp, -1, is standard)`);
  switch (n) {
    case 4:
      return new Date(src.readUInt32BE(p) * 1000);
    case 8: {
      const hi = src.readUInt32BE(p);
      const lo = src.readUInt32BE(p + 4);
      const ns = hi >>> 2;
      const secs = (hi & 3) * 4294967296 + lo;
      return new Date(secs * 1000 + ns / 1e6);
    }
    case 12: {
      const ns = src.readUInt32BE(p);
      const secs = src.readInt32BE(p + 4) * 4294967296 + src.readUInt32BE(p + 8);
      return new Date(secs * 1000 + ns / 1e6);
    }
  }
  return bad(`timestamp of ${n} bytes`);
}
