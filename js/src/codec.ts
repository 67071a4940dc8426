/**
 * The kura value envelope, version 2 (docs/FORMAT.md): the same bytes the Go
 * package github.com/kuracache/kura/codec reads and writes.
 *
 * `Codec.encode` writes a value entry; `encodeEntry` writes the entries that
 * hold no value (negative, lease, tombstone); `Codec.decode` reads versions
 * 1 and 2 and throws a {@link FormatError} whose `code` is the Go sentinel
 * the same bytes fail with there.
 */

import { createHash } from 'node:crypto';
import { Decoder, Encoder, ExtensionCodec } from '@msgpack/msgpack';
import { FormatError } from './errors.js';
import { readUvarint, pushUvarint, uvarintLen } from './varint.js';
import { s2Decode, s2Encode, parseS2Dict, S2CorruptError, type S2Dict } from './s2.js';
import { zstdAvailable, zstdCompress, zstdDecompress, ZstdDict } from './zstd.js';
import { allocBound, checkJSON, checkMsgPack } from './check.js';

export { FormatError, isFormatError, type FormatErrorCode } from './errors.js';

/** Magic bytes: 0xC1 (never valid msgpack or UTF-8), 'K'. */
export const MAGIC0 = 0xc1;
export const MAGIC1 = 0x4b;
/** The format version writers write. */
export const VERSION = 2;
/** Most bytes a field section may have. */
export const MAX_FIELDS_LEN = 4096;
/** Default limit on a value's uncompressed length (64 MiB). */
export const DEFAULT_MAX_DECODED_SIZE = 64 << 20;
/** Payloads shorter than this are stored uncompressed by default. */
export const DEFAULT_MIN_COMPRESS_SIZE = 256;
/** Compression must save at least this fraction to be kept, by default. */
export const DEFAULT_MIN_SAVINGS = 0.1;
/** Above RATIO_FLOOR a payload may claim at most MAX_RATIO times its stored size. */
export const MAX_RATIO = 256;
export const RATIO_FLOOR = 1 << 20;
/** Blocks up to this size decompress into the codec's reused scratch buffer. */
const SCRATCH_MAX = 256 << 10;

/** The compact value format (version 3), which `compact` writers write. */
export const VERSION_COMPACT = 3;
/** The zero of a compact entry's write time (seconds): 2026-01-01T00:00:00Z, in Unix seconds. */
export const COMPACT_EPOCH = 1767225600;

/** Entry kinds (byte 3 of a version 2 entry). */
export const Kind = { value: 0, negative: 1, lease: 2, tombstone: 3 } as const;
export type KindName = keyof typeof Kind;
const kindNames: KindName[] = ['value', 'negative', 'lease', 'tombstone'];

/** Serializer ids. */
export const SerializerId = { msgpack: 1, json: 2, raw: 3, idlist: 4, string: 5, 'msgpack-array': 6 } as const;
export type SerializerName = keyof typeof SerializerId;
/** Compressor ids. */
export const CompressorId = { none: 0, s2: 1, zstd: 2, 's2-dict': 3 } as const;
export type CompressorName = keyof typeof CompressorId;

/** Field tags. */
export const Tag = { schema: 0x01, written: 0x02, ttl: 0x03, cost: 0x04, token: 0x05, dictDigest: 0x06, critical: 0x80 } as const;

/** Length of a dictionary digest (field 0x06): the first 128 bits of the dictionary's SHA-256. */
export const DIGEST_LEN = 16;

/** A dictionary's content-derived id: the first 28 bits of its SHA-256, 0 becoming 1 (Go: codec.DictionaryID). */
export function dictionaryID(d: Uint8Array): number {
  const sum = createHash('sha256').update(d).digest();
  const id = sum.readUInt32BE(0) >>> 4;
  return id === 0 ? 1 : id;
}

/** The digest a value carries for dictionary `d` (docs/FORMAT.md, "Dictionaries"). */
export function dictDigest(d: Uint8Array): Uint8Array {
  return new Uint8Array(createHash('sha256').update(d).digest().subarray(0, DIGEST_LEN));
}

/** Header fields of an entry. Absent fields are undefined. */
export interface Fields {
  /** Schema fingerprint (uint32) of the writer's type. */
  schema?: number;
  /** Write time, Unix milliseconds. */
  written?: number;
  /** TTL the writer set, milliseconds. */
  ttl?: number;
  /** How long the loader took, microseconds. */
  cost?: number;
  /** Lease holder's token. */
  token?: Uint8Array;
  /**
   * Digest of the dictionary the payload was compressed with (16 bytes).
   * `encode` sets it on every value that names a dictionary; `decode`
   * refuses a dictionary whose bytes do not hash to it.
   */
  dictDigest?: Uint8Array;
}

/** A parsed header. */
export interface Header {
  version: number;
  kind: KindName;
  fields: Fields;
  serializer: number;
  compressor: number;
  dict: number;
  rawLen: number;
  /** Bytes of header (where the payload starts). */
  len: number;
}

const MAX_MS = 9223372036854; // math.MaxInt64 / 1e6, as the Go reader bounds it
const MAX_US = 9223372036854775; // math.MaxInt64 / 1e3

const fail = (code: ConstructorParameters<typeof FormatError>[0], why: string): never => {
  throw new FormatError(code, why);
};

function parseFields(b: Uint8Array, start: number, end: number, f: Fields): void {
  const seen = new Uint8Array(Tag.dictDigest + 1);
  let i = start;
  while (i < end) {
    const tag = b[i];
    const l = readUvarint(b, i + 1);
    if (l.n <= 0 || i + 1 + l.n > end) fail('ErrCorrupt', `field 0x${tag.toString(16)} length`);
    const ds = i + 1 + l.n;
    if (l.value > end - ds) fail('ErrCorrupt', `field 0x${tag.toString(16)} claims ${l.value} bytes, ${end - ds} left`);
    const de = ds + l.value;
    i = de;
    if (tag !== 0 && tag <= Tag.dictDigest) {
      if (seen[tag]) fail('ErrCorrupt', `field 0x${tag.toString(16)} twice`);
      seen[tag] = 1;
    }
    const uv = (): number => {
      const x = readUvarint(b, ds);
      if (x.n <= 0 || x.n !== de - ds) fail('ErrCorrupt', `field 0x${tag.toString(16)} is not one uvarint`);
      return x.value;
    };
    switch (tag) {
      case Tag.schema:
        if (de - ds !== 4) fail('ErrCorrupt', `schema field of ${de - ds} bytes, want 4`);
        f.schema = ((b[ds] << 24) | (b[ds + 1] << 16) | (b[ds + 2] << 8) | b[ds + 3]) >>> 0;
        break;
      case Tag.written: {
        const x = uv();
        if (x > MAX_MS) fail('ErrCorrupt', 'written time out of range');
        f.written = x;
        break;
      }
      case Tag.ttl: {
        const x = uv();
        if (x > MAX_MS) fail('ErrCorrupt', 'ttl out of range');
        f.ttl = x;
        break;
      }
      case Tag.cost: {
        const x = uv();
        if (x > MAX_US) fail('ErrCorrupt', 'cost out of range');
        f.cost = x;
        break;
      }
      case Tag.token:
        f.token = b.slice(ds, de);
        break;
      case Tag.dictDigest:
        if (de - ds !== DIGEST_LEN) fail('ErrCorrupt', `dictionary digest field of ${de - ds} bytes, want ${DIGEST_LEN}`);
        if (b.subarray(ds, de).every((c) => c === 0)) fail('ErrCorrupt', 'dictionary digest field of zeros');
        f.dictDigest = b.slice(ds, de);
        break;
      default:
        if (tag & Tag.critical) fail('ErrNotUnderstood', `critical field 0x${tag.toString(16)}`);
    }
  }
}

/**
 * Parses an entry's header (docs/FORMAT.md "Decoding rules", steps 1-6).
 * Entries that are not values are checked to end after their fields.
 */
export function parseHeader(data: Uint8Array): Header {
  const h: Header = { version: 0, kind: 'value', fields: {}, serializer: 0, compressor: 0, dict: 0, rawLen: 0, len: 0 };
  if (data.length < 2) {
    if (data.length === 0 || data[0] === MAGIC0) fail('ErrTruncated', `${data.length} byte(s)`);
    fail('ErrNotKura', 'not a kura value');
  }
  if (data[0] !== MAGIC0 || data[1] !== MAGIC1) fail('ErrNotKura', 'not a kura value (magic)');
  if (data.length < 3) fail('ErrTruncated', 'no version byte');
  h.version = data[2] & 0x0f;
  const flags = data[2] & 0xf0;
  let off: number;
  if (h.version === 1) {
    if (flags & ~0x10) fail('ErrUnsupportedVersion', `unknown flag bits 0x${(flags & ~0x10).toString(16)}`);
    if (flags & 0x10) {
      h.kind = 'negative';
      h.len = 3;
      if (data.length !== 3) fail('ErrCorrupt', `negative entry followed by ${data.length - 3} byte(s)`);
      return h;
    }
    off = 3;
  } else if (h.version === 2) {
    if (flags !== 0) fail('ErrUnsupportedVersion', `flag bits 0x${flags.toString(16)} in version 2`);
    if (data.length < 5) fail('ErrTruncated', `header ends at byte ${data.length}`);
    const k = data[3];
    if (k > 3) fail('ErrNotUnderstood', `entry kind ${k}`);
    h.kind = kindNames[k];
    const fl = readUvarint(data, 4);
    if (fl.n === 0) fail('ErrTruncated', 'field section length');
    if (fl.n < 0 || fl.value > MAX_FIELDS_LEN) fail('ErrCorrupt', 'field section length out of range');
    if (fl.value > data.length - 4 - fl.n) fail('ErrTruncated', `field section of ${fl.value} bytes, ${data.length - 4 - fl.n} left`);
    off = 4 + fl.n + fl.value;
    parseFields(data, 4 + fl.n, off, h.fields);
    if (h.kind !== 'value') {
      h.len = off;
      if (data.length !== off) fail('ErrCorrupt', `${h.kind} entry followed by ${data.length - off} byte(s)`);
      return h;
    }
  } else if (h.version === VERSION_COMPACT) {
    if (flags & ~0x30) fail('ErrUnsupportedVersion', `flag bits 0x${flags.toString(16)} in version 3`);
    parseCompact(data, h);
    if (h.serializer === 0) fail('ErrUnknownSerializer', 'serializer id 0');
    return h;
  } else {
    return fail('ErrUnsupportedVersion', `version ${h.version} (this reader knows 1, 2 and 3)`);
  }
  if (data.length < off + 2) fail('ErrTruncated', `header ends at byte ${data.length}`);
  h.serializer = data[off];
  h.compressor = data[off + 1];
  off += 2;
  off += readDictID(data, off, h);
  off += readRawLen(data, off, h);
  h.len = off;
  if (h.serializer === 0) fail('ErrUnknownSerializer', 'serializer id 0');
  return h;
}

/** Reads the dictionary id uvarint at off into h; returns its length. */
function readDictID(data: Uint8Array, off: number, h: Header): number {
  const d = readUvarint(data, off);
  if (d.n === 0) fail('ErrTruncated', 'dictionary id');
  if (d.n < 0 || d.value > 0xffffffff || d.n > 5) fail('ErrCorrupt', 'dictionary id out of range');
  h.dict = d.value;
  return d.n;
}

/** Reads the uncompressed length uvarint at off into h; returns its length. */
function readRawLen(data: Uint8Array, off: number, h: Header): number {
  const l = readUvarint(data, off);
  if (l.n === 0) fail('ErrTruncated', 'uncompressed length');
  if (l.n < 0 || l.value > Number.MAX_SAFE_INTEGER) fail('ErrCorrupt', 'uncompressed length out of range');
  h.rawLen = l.value;
  return l.n;
}

/** The compact layout byte (docs/FORMAT.md, "Version 3"). */
const Compact = { serMask: 0x07, compressed: 0x08, schema: 0x10, written: 0x20, fields: 0x40, reserved: 0x80 } as const;

function parseCompact(data: Uint8Array, h: Header): void {
  if (data.length < 4) fail('ErrTruncated', 'no layout byte');
  const layout = data[3];
  if (layout & Compact.reserved) fail('ErrNotUnderstood', 'compact layout bit 0x80');
  let off = 4;
  h.serializer = layout & Compact.serMask;
  if (h.serializer === 0) {
    if (data.length < off + 1) fail('ErrTruncated', 'serializer id');
    h.serializer = data[off++];
    if (h.serializer <= Compact.serMask) fail('ErrCorrupt', `serializer id ${h.serializer} written as a byte`);
  }
  if (layout & Compact.schema) {
    if (data.length < off + 4) fail('ErrTruncated', 'schema fingerprint');
    h.fields.schema = ((data[off] << 24) | (data[off + 1] << 16) | (data[off + 2] << 8) | data[off + 3]) >>> 0;
    off += 4;
  }
  if (layout & Compact.written) {
    const w = readUvarint(data, off);
    if (w.n === 0) fail('ErrTruncated', 'write time');
    if (w.n < 0 || w.value > 2 ** 33) fail('ErrCorrupt', 'write time out of range');
    h.fields.written = (COMPACT_EPOCH + w.value) * 1000;
    off += w.n;
  }
  const refresh = (data[2] & 0x20) !== 0;
  if (refresh) {
    // Byte 2's bit 0x20: TTL in whole seconds, load cost in microseconds.
    const t = readUvarint(data, off);
    if (t.n <= 0) fail('ErrTruncated', 'ttl');
    off += t.n;
    const c = readUvarint(data, off);
    if (c.n === 0) fail('ErrTruncated', 'load cost');
    if (c.n < 0 || t.value > 2 ** 33 || t.value === 0 || c.value > 2 ** 33 * 1e6) fail('ErrCorrupt', 'ttl or load cost out of range');
    off += c.n;
    h.fields.ttl = t.value * 1000;
    if (c.value > 0) h.fields.cost = c.value;
  }
  if (layout & Compact.fields) {
    const fl = readUvarint(data, off);
    if (fl.n === 0) fail('ErrTruncated', 'field section length');
    if (fl.n < 0 || fl.value > MAX_FIELDS_LEN) fail('ErrCorrupt', 'field section length out of range');
    if (fl.value > data.length - off - fl.n) fail('ErrTruncated', `field section of ${fl.value} bytes, ${data.length - off - fl.n} left`);
    const f: Fields = {};
    parseFields(data, off + fl.n, off + fl.n + fl.value, f);
    if (f.schema !== undefined || f.written !== undefined || (refresh && (f.ttl !== undefined || f.cost !== undefined))) {
      fail('ErrCorrupt', "a field of the compact header repeated in its field section");
    }
    h.fields = refresh ? { ...f, schema: h.fields.schema, written: h.fields.written, ttl: h.fields.ttl, cost: h.fields.cost } : { ...f, schema: h.fields.schema, written: h.fields.written };
    if (h.fields.cost === undefined) delete h.fields.cost;
    if (h.fields.ttl === undefined) delete h.fields.ttl;
    if (h.fields.schema === undefined) delete h.fields.schema;
    if (h.fields.written === undefined) delete h.fields.written;
    off += fl.n + fl.value;
  }
  if (data[2] & 0x10) {
    // Byte 2's bit 0x10: a Snappy block (compressor s2), no compressor byte.
    if (layout & Compact.compressed) fail('ErrCorrupt', 's2 bit and a compressor byte');
    h.compressor = CompressorId.s2;
  } else if (layout & Compact.compressed) {
    if (data.length < off + 1) fail('ErrTruncated', 'compressor id');
    h.compressor = data[off++];
    if (h.compressor === 0 || h.compressor === CompressorId.s2) fail('ErrCorrupt', `compressor byte ${h.compressor} (0 is none; s2 is byte 2's bit 0x10)`);
  }
  if (h.compressor !== 0) {
    if (compactHasDict(h.compressor)) off += readDictID(data, off, h);
    // A Snappy or S2 block starts with its own uncompressed length: the header does not repeat it.
    const n = readRawLen(data, off, h);
    if (compactHasLen(h.compressor)) off += n;
  } else {
    h.rawLen = data.length - off;
  }
  h.len = off;
}

function compactHeader(fields: Fields | undefined, ser: number, comp: number, dict: number, rawLen: number): number[] {
  let layout = ser <= Compact.serMask ? ser : 0;
  if (comp !== 0 && comp !== CompressorId.s2) layout |= Compact.compressed;
  const f = fields ?? {};
  if (f.schema !== undefined) layout |= Compact.schema;
  const secs = f.written !== undefined ? Math.floor(Math.floor(f.written) / 1000) - COMPACT_EPOCH : -1;
  if (secs >= 0 && secs <= 2 ** 33) layout |= Compact.written;
  const ttlMs = f.ttl !== undefined ? Math.floor(f.ttl) : 0;
  const refresh = ttlMs > 0 && ttlMs % 1000 === 0 && ttlMs / 1000 <= 2 ** 33;
  const rest: Fields = { ...f, schema: undefined, written: undefined };
  if (refresh) {
    rest.ttl = undefined;
    rest.cost = undefined;
  }
  const fb = fieldsBytes(rest);
  if (fb.length > 1) layout |= Compact.fields;
  const h = [MAGIC0, MAGIC1, VERSION_COMPACT | (comp === CompressorId.s2 ? 0x10 : 0) | (refresh ? 0x20 : 0), layout];
  if ((layout & Compact.serMask) === 0) h.push(ser);
  if (f.schema !== undefined) {
    const s = f.schema >>> 0;
    h.push(s >>> 24, (s >>> 16) & 0xff, (s >>> 8) & 0xff, s & 0xff);
  }
  if (layout & Compact.written) pushUvarint(h, secs);
  if (refresh) {
    pushUvarint(h, ttlMs / 1000);
    pushUvarint(h, f.cost !== undefined && f.cost > 0 ? Math.floor(f.cost) : 0);
  }
  if (layout & Compact.fields) h.push(...fb);
  if (comp !== 0) {
    if (comp !== CompressorId.s2) h.push(comp);
    if (compactHasDict(comp)) pushUvarint(h, dict);
    if (compactHasLen(comp)) pushUvarint(h, rawLen);
  }
  return h;
}

/** Every compressor but s2 names a dictionary id in a compact entry. */
const compactHasDict = (comp: number): boolean => comp !== CompressorId.s2;
/** s2 and s2-dict blocks start with their uncompressed length; other compressors store it in a compact header. */
const compactHasLen = (comp: number): boolean => comp !== CompressorId.s2 && comp !== CompressorId['s2-dict'];

function fieldsBytes(f: Fields | undefined): number[] {
  const out: number[] = [];
  if (!f) {
    out.push(0);
    return out;
  }
  const b: number[] = [];
  const uv = (tag: number, x: number) => {
    b.push(tag, uvarintLen(x));
    pushUvarint(b, x);
  };
  if (f.schema !== undefined) {
    const s = f.schema >>> 0;
    b.push(Tag.schema, 4, s >>> 24, (s >>> 16) & 0xff, (s >>> 8) & 0xff, s & 0xff);
  }
  if (f.written !== undefined && Math.floor(f.written) > 0) uv(Tag.written, Math.floor(f.written));
  if (f.ttl !== undefined && Math.floor(f.ttl) > 0) uv(Tag.ttl, Math.floor(f.ttl));
  if (f.cost !== undefined && Math.floor(f.cost) > 0) uv(Tag.cost, Math.floor(f.cost));
  if (f.token !== undefined && f.token.length > 0) {
    b.push(Tag.token);
    pushUvarint(b, f.token.length);
    for (const c of f.token) b.push(c);
  }
  if (f.dictDigest !== undefined && f.dictDigest.length === DIGEST_LEN) {
    b.push(Tag.dictDigest, DIGEST_LEN);
    for (const c of f.dictDigest) b.push(c);
  }
  pushUvarint(out, b.length);
  for (const c of b) out.push(c);
  return out;
}

/** Writes an entry that holds no value (negative, lease or tombstone), with its fields. */
export function encodeEntry(kind: Exclude<KindName, 'value'>, fields?: Fields): Buffer {
  const fb = fieldsBytes(fields);
  return Buffer.from([MAGIC0, MAGIC1, VERSION, Kind[kind], ...fb]);
}

function valueHeaderV2(fields: Fields | undefined, ser: number, comp: number, dict: number, rawLen: number): number[] {
  const h = [MAGIC0, MAGIC1, VERSION, Kind.value, ...fieldsBytes(fields), ser, comp];
  pushUvarint(h, dict);
  pushUvarint(h, rawLen);
  return h;
}

/** Options of a Codec. Every field's zero value (undefined) is the default named on it. */
export interface CodecOptions {
  /** How values are serialized. Default 'msgpack' (what Go writes by default). */
  serializer?: SerializerName;
  /** How payloads are compressed. Default 's2' (plain Snappy blocks). */
  compressor?: CompressorName;
  /** zstd level. Default 3. */
  zstdLevel?: number;
  /** Payloads shorter than this are stored as is. Default 256; negative: compress everything. */
  minCompressSize?: number;
  /** Keep the compressed form only if it saves this fraction. Default 0.1; negative: any saving. */
  minSavings?: number;
  /** Refuse values whose uncompressed length claims more. Default 64 MiB. */
  maxDecodedSize?: number;
  /**
   * Dictionaries by envelope id, for reading and (with `dictionary`) writing.
   * zstd: a zstd-format dictionary or raw content; s2-dict: S2's format
   * (uvarint repeat offset, then 16 B to 64 KiB of content).
   */
  dictionaries?: Map<number, Uint8Array> | Record<number, Uint8Array>;
  /** The id (in `dictionaries`) to compress with. Default 0: none. */
  dictionary?: number;
  /**
   * Write the compact envelope (version 3, docs/FORMAT.md): with 'msgpack',
   * a string is stored as its UTF-8 bytes (serializer 'string') without a
   * schema fingerprint, the write time in seconds, no length for an
   * uncompressed payload. Default false (version 2). Every reader of this
   * package and of the Go package from the same release reads both; older
   * readers treat compact entries as not understood, so upgrade readers first.
   */
  compact?: boolean;
  /**
   * Write every object's keys in the order the object lists them. Default
   * false: keys are sorted in UTF-8 byte order, as the Go package writes a
   * map (`map[string]any`), so one document gives one byte string in either
   * language and a dictionary trained on either side's values matches the
   * other's (docs/FORMAT.md, "Map keys"). Set it to mirror a Go struct's
   * field order byte for byte (readers match fields by name either way).
   */
  keepKeyOrder?: boolean;
}

/**
 * Compares two strings in the order of their UTF-8 bytes (the order of
 * their code points), which is how Go sorts map keys. JavaScript's default
 * sort compares UTF-16 code units, which puts a character above U+FFFF
 * (a surrogate pair, 0xD800-0xDFFF) before U+E000-U+FFFF; integer-like
 * keys ("10", "9") are ordinary strings here, not the numbers an object
 * lists first.
 */
export function compareUtf8(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    // Surrogates move above U+E000-U+FFFF; nothing else changes order.
    if (x >= 0xd800) x += x <= 0xdfff ? 0x2000 : -0x800;
    if (y >= 0xd800) y += y <= 0xdfff ? 0x2000 : -0x800;
    return x - y;
  }
  return a.length - b.length;
}

/** The members of @msgpack/msgpack 3.x's Encoder that sortedKeyEncoder replaces and uses. */
interface EncoderInternals {
  encodeMap(object: Record<string, unknown>, depth: number): void;
  encodeString(s: string): void;
  doEncode(v: unknown, depth: number): void;
  writeU8(v: number): void;
  writeU16(v: number): void;
  writeU32(v: number): void;
}

/**
 * An @msgpack/msgpack Encoder that writes map keys in UTF-8 byte order (its
 * own sortKeys option sorts by UTF-16 code units, which differs from Go for
 * characters above U+FFFF). It replaces the Encoder's map writer on this one
 * instance; format.test.mjs checks the bytes against Go's
 * (testdata/format/sorted-keys.json), so a library upgrade that changes the
 * internals fails there, and the constructor refuses one that lost them.
 */
function sortedKeyEncoder(): Encoder {
  const enc = new Encoder({ ignoreUndefined: false });
  const e = enc as unknown as EncoderInternals;
  for (const m of ['encodeMap', 'encodeString', 'doEncode', 'writeU8', 'writeU16', 'writeU32'] as const) {
    if (typeof e[m] !== 'function') throw new Error(`kura: codec: @msgpack/msgpack's Encoder has no ${m}: sorted map keys need the 3.x encoder`);
  }
  e.encodeMap = function (this: EncoderInternals, object: Record<string, unknown>, depth: number): void {
    const keys = Object.keys(object);
    if (keys.length > 1) keys.sort(compareUtf8);
    const size = keys.length;
    if (size < 16) this.writeU8(0x80 + size);
    else if (size < 0x10000) {
      this.writeU8(0xde);
      this.writeU16(size);
    } else if (size < 0x100000000) {
      this.writeU8(0xdf);
      this.writeU32(size);
    } else throw new Error(`Too large map object: ${size}`);
    for (const key of keys) {
      this.encodeString(key);
      this.doEncode(object[key], depth + 1);
    }
  };
  return enc;
}

/** A decoded entry: the header and, for kind 'value', the value. */
export interface Decoded<T = unknown> {
  header: Header;
  kind: KindName;
  value?: T;
}

interface DictEntry {
  bytes: Uint8Array;
  digest?: Uint8Array;
  s2?: S2Dict | null;
  zstd?: ZstdDict;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Encodes and decodes envelopes. One Codec is cheap to share: it holds the
 * options, the dictionaries and reusable msgpack coders.
 */
export class Codec {
  readonly serializer: SerializerName;
  readonly compressor: CompressorName;
  readonly maxDecodedSize: number;
  private readonly minCompress: number;
  private readonly minSavings: number;
  private readonly level: number;
  private readonly dictId: number;
  private readonly compact: boolean;
  private readonly dicts = new Map<number, DictEntry>();
  // Writing: @msgpack/msgpack, which encodes integers beyond 32 bits as
  // int64/uint64 (msgpackr writes them as float64, which Go's int fields
  // refuse). Reading: @msgpack/msgpack's Decoder too (decodeMsgPack), after
  // checkMsgPack's bound; Date is the timestamp extension (-1) both ways.
  private readonly enc: Encoder;
  private scratch: Buffer = Buffer.alloc(0);

  constructor(opts: CodecOptions = {}) {
    this.serializer = opts.serializer ?? 'msgpack';
    this.compressor = opts.compressor ?? 's2';
    if (!(this.serializer in SerializerId)) throw new Error(`kura: codec: serializer: unknown ${String(this.serializer)}`);
    if (!(this.compressor in CompressorId)) throw new Error(`kura: codec: compressor: unknown ${String(this.compressor)}`);
    const mc = opts.minCompressSize ?? 0;
    this.minCompress = mc === 0 ? DEFAULT_MIN_COMPRESS_SIZE : mc < 0 ? 0 : mc;
    const ms = opts.minSavings ?? 0;
    if (Number.isNaN(ms) || ms >= 1) throw new Error(`kura: codec: minSavings: ${ms}; want a fraction below 1`);
    // Compact: 0 keeps compression whenever the entry is smaller, header included (as Go).
    this.minSavings = ms === 0 ? (opts.compact ? 0 : DEFAULT_MIN_SAVINGS) : ms < 0 ? 0 : ms;
    const md = opts.maxDecodedSize ?? 0;
    if (md < 0) throw new Error(`kura: codec: maxDecodedSize: ${md}; want 0 (64 MiB) or a positive size`);
    this.maxDecodedSize = md === 0 ? DEFAULT_MAX_DECODED_SIZE : md;
    this.level = opts.zstdLevel ?? 3;
    this.compact = opts.compact ?? false;
    this.enc = opts.keepKeyOrder ? new Encoder({ ignoreUndefined: false }) : sortedKeyEncoder();
    const entries = opts.dictionaries instanceof Map ? [...opts.dictionaries] : Object.entries(opts.dictionaries ?? {}).map(([k, v]) => [Number(k), v] as const);
    for (const [id, bytes] of entries) {
      if (!Number.isInteger(id) || id <= 0 || id > 0xffffffff) throw new Error(`kura: codec: dictionaries: id ${id} is not a uint32 above 0`);
      if (bytes.length === 0) throw new Error(`kura: codec: dictionaries: dictionary ${id} is empty`);
      this.dicts.set(id, { bytes });
    }
    this.dictId = opts.dictionary ?? 0;
    if (this.dictId !== 0) {
      const e = this.dicts.get(this.dictId);
      if (!e) throw new Error(`kura: codec: dictionary: id ${this.dictId} is not in dictionaries`);
      if (this.compressor === 's2-dict' && !this.s2Dict(e)) throw new Error(`kura: codec: dictionary: ${this.dictId} is not an S2 dictionary`);
      if (this.compressor !== 's2-dict' && this.compressor !== 'zstd') throw new Error(`kura: codec: dictionary: compressor ${this.compressor} takes no dictionary`);
    } else if (this.compressor === 's2-dict') {
      throw new Error('kura: codec: compressor s2-dict needs a dictionary');
    }
    if (this.compressor === 'zstd' && !zstdAvailable()) throw new Error('kura: codec: zstd is not available in this process');
  }

  /** Adds a dictionary for reading (e.g. one loaded from the store), replacing one of other content under the id. */
  addDictionary(id: number, bytes: Uint8Array): void {
    const e = this.dicts.get(id);
    if (e && Buffer.from(e.bytes).equals(Buffer.from(bytes))) return;
    if (id === this.dictId) throw new Error(`kura: codec: dictionary ${id} is the one this codec writes with; it cannot be replaced`);
    this.dicts.set(id, { bytes });
  }

  /** Forgets dictionary id (one read from a store that no longer holds it); the one this codec writes with stays. */
  removeDictionary(id: number): void {
    if (id !== this.dictId) this.dicts.delete(id);
  }

  /** Reports whether the codec holds dictionary id (with the given digest, when one is given). */
  hasDictionary(id: number, digest?: Uint8Array): boolean {
    const e = this.dicts.get(id);
    if (!e) return false;
    return !digest || Buffer.from(this.digestOf(e)).equals(Buffer.from(digest));
  }

  private digestOf(e: DictEntry): Uint8Array {
    if (!e.digest) e.digest = dictDigest(e.bytes);
    return e.digest;
  }

  private s2Dict(e: DictEntry): S2Dict | null {
    if (e.s2 === undefined) e.s2 = parseS2Dict(e.bytes) ?? null;
    return e.s2;
  }

  private zstdDict(e: DictEntry): ZstdDict {
    if (!e.zstd) e.zstd = new ZstdDict(e.bytes);
    return e.zstd;
  }

  /** A negative ("not found") entry, as Go's Codec.EncodeNegative writes it (no fields). */
  encodeNegative(): Buffer {
    return encodeEntry('negative');
  }

  /** Serializes v with the codec's serializer. */
  serialize(v: unknown, ser: SerializerName = this.serializer): Uint8Array {
    switch (ser) {
      case 'msgpack':
      case 'msgpack-array':
        return this.enc.encode(v);
      case 'string':
        if (typeof v === 'string') return Buffer.from(v, 'utf8');
        throw new TypeError('kura: encode with string: want a string');
      case 'json': {
        const s = JSON.stringify(v);
        if (s === undefined) throw new TypeError('kura: encode with json: value has no JSON form');
        return Buffer.from(s, 'utf8');
      }
      case 'raw':
        if (typeof v === 'string') return Buffer.from(v, 'utf8');
        if (v instanceof Uint8Array) return v;
        throw new TypeError('kura: encode with raw: want a string or a Uint8Array');
      case 'idlist':
        return encodeIDs(v);
    }
  }

  /**
   * Encodes a value entry with the given fields. The payload is compressed
   * when it is at least minCompressSize long and compression saves
   * minSavings of it, and stays readable under the reader's bounds
   * (otherwise it is stored as is, as the Go writer does).
   */
  encode(v: unknown, fields?: Fields): Buffer {
    let serName = this.serializer;
    let plain = fields && fields.dictDigest ? { ...fields, dictDigest: undefined } : fields;
    if (this.compact && serName === 'msgpack' && typeof v === 'string' && !hasLoneSurrogate(v)) {
      // The serializer says it is a string: no fingerprint needed (as Go writes it).
      serName = 'string';
      if (plain && plain.schema !== undefined) plain = { ...plain, schema: undefined };
    }
    const payload = this.serialize(v, serName);
    if (payload.length > this.maxDecodedSize) {
      throw new RangeError(`kura: value too large: ${payload.length} bytes serialized, maxDecodedSize is ${this.maxDecodedSize}`);
    }
    const ser = SerializerId[serName];
    const compId = CompressorId[this.compressor];
    const valueHeader = this.compact ? compactHeader : valueHeaderV2;
    if (compId !== 0 && payload.length >= this.minCompress) {
      const withDict = this.dictId ? { ...plain, dictDigest: this.digestOf(this.dicts.get(this.dictId)!) } : plain;
      const hdr = valueHeader(withDict, ser, compId, this.dictId, payload.length);
      const out = this.compress(payload);
      // Compact: what the compressed form's header adds counts against it.
      const saved = payload.length - out.length - (this.compact ? hdr.length - valueHeader(withDict, ser, 0, 0, payload.length).length : 0);
      const stored = hdr.length + out.length;
      if (saved > 0 && saved >= this.minSavings * payload.length && !ratioTooHigh(payload.length, out.length) && this.readable(payload, stored)) {
        const b = Buffer.allocUnsafe(stored);
        b.set(hdr, 0);
        b.set(out, hdr.length);
        return b;
      }
    }
    const hdr = valueHeader(plain, ser, 0, 0, payload.length);
    const b = Buffer.allocUnsafe(hdr.length + payload.length);
    b.set(hdr, 0);
    b.set(payload, hdr.length);
    return b;
  }

  private compress(payload: Uint8Array): Uint8Array {
    switch (this.compressor) {
      case 's2':
        return s2Encode(payload);
      case 's2-dict':
        return s2Encode(payload, this.s2Dict(this.dicts.get(this.dictId)!)!);
      case 'zstd':
        return zstdCompress(payload, this.level, this.dictId ? this.zstdDict(this.dicts.get(this.dictId)!) : undefined);
      default:
        return payload;
    }
  }

  private readable(payload: Uint8Array, stored: number): boolean {
    if (stored >= payload.length) return true;
    try {
      if (this.serializer === 'msgpack' || this.serializer === 'msgpack-array') checkMsgPack(payload, allocBound(stored));
      else if (this.serializer === 'json') checkJSON(payload, allocBound(stored));
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Decodes any entry. Values come back in `value`; negative, lease and
   * tombstone entries have none. Throws FormatError (check `notUnderstood`).
   */
  decode<T = unknown>(data: Uint8Array): Decoded<T> {
    const h = parseHeader(data);
    if (h.kind !== 'value') return { header: h, kind: h.kind };
    return { header: h, kind: 'value', value: this.decodeValue(h, data) as T };
  }

  /** Decodes the payload of a value entry whose header parseHeader returned. */
  decodeValue(h: Header, data: Uint8Array): unknown {
    const serName = serializerName(h.serializer);
    if (!serName) fail('ErrUnknownSerializer', `serializer ${h.serializer}`);
    if (h.rawLen > this.maxDecodedSize) fail('ErrTooLarge', `header claims ${h.rawLen} bytes, limit ${this.maxDecodedSize}`);
    const payload = data.subarray(h.len);
    let raw: Uint8Array;
    let owned = true;
    if (h.compressor === 0) {
      if (h.dict !== 0) fail('ErrCorrupt', `dictionary ${h.dict} without a compressor`);
      if (payload.length < h.rawLen) fail('ErrTruncated', `payload has ${payload.length} of ${h.rawLen} bytes`);
      if (payload.length > h.rawLen) fail('ErrCorrupt', `${payload.length - h.rawLen} bytes after the ${h.rawLen}-byte payload`);
      raw = payload;
    } else {
      if (h.compressor > 3) fail('ErrUnknownCompressor', `compressor ${h.compressor}`);
      if (h.compressor === 2 && !zstdAvailable()) {
        // Never garbage: a reader without zstd leaves the entry to readers that have it.
        fail('ErrNotUnderstood', 'zstd is not available in this process');
      }
      if (ratioTooHigh(h.rawLen, payload.length)) {
        fail('ErrBomb', `${payload.length} compressed bytes claim ${h.rawLen} uncompressed (more than ${MAX_RATIO}x above ${RATIO_FLOOR} bytes)`);
      }
      let de: DictEntry | undefined;
      if (h.dict !== 0) {
        de = this.dicts.get(h.dict);
        if (!de) fail('ErrUnknownDictionary', `dictionary ${h.dict}`);
        const want = h.fields.dictDigest;
        if (want && !Buffer.from(this.digestOf(de!)).equals(Buffer.from(want))) {
          // A dictionary of other content under this id (a forgery of the short id): never used.
          fail('ErrUnknownDictionary', `dictionary ${h.dict}: content does not match the value's digest`);
        }
      } else if (h.compressor === 3) {
        fail('ErrCorrupt', 's2-dict without a dictionary');
      }
      try {
        if (h.compressor === 1) {
          if (de) fail('ErrCorrupt', `s2 block with dictionary ${h.dict}`);
          raw = s2Decode(payload, h.rawLen, undefined, this.scratchFor(h.rawLen));
          owned = raw.buffer !== this.scratch.buffer;
        } else if (h.compressor === 3) {
          const sd = this.s2Dict(de!);
          if (!sd) fail('ErrUnknownDictionary', `dictionary ${h.dict} is not an S2 dictionary`);
          raw = s2Decode(payload, h.rawLen, sd!, this.scratchFor(h.rawLen));
          owned = raw.buffer !== this.scratch.buffer;
        } else {
          const stored = data.length;
          return zstdDecompress(payload, h.rawLen, de ? this.zstdDict(de) : undefined, (view) => this.deserialize(serName!, view, stored, false));
        }
      } catch (err) {
        if (err instanceof FormatError) throw err;
        if (err instanceof S2CorruptError) throw new FormatError('ErrCorrupt', err.message, { cause: err });
        throw err;
      }
    }
    return this.deserialize(serName!, raw, data.length, owned);
  }

  /**
   * The scratch buffer a block up to SCRATCH_MAX bytes decompresses into
   * (every deserializer copies out what it keeps): grown on demand, never
   * past SCRATCH_MAX; undefined above it (the decoder allocates).
   */
  private scratchFor(n: number): Buffer | undefined {
    if (n > SCRATCH_MAX) return undefined;
    if (this.scratch.length < n) this.scratch = Buffer.allocUnsafeSlow(Math.max(n, Math.min(SCRATCH_MAX, this.scratch.length * 2)));
    return this.scratch;
  }

  /** Deserializes raw; when raw is not owned (a view the caller frees), nothing returned may alias it. */
  private deserialize(ser: SerializerName, raw: Uint8Array, stored: number, owned: boolean): unknown {
    switch (ser) {
      case 'string':
        try {
          return utf8.decode(raw);
        } catch (err) {
          throw new FormatError('ErrDeserialize', `string: ${(err as Error).message}`, { cause: err });
        }
      case 'msgpack':
      case 'msgpack-array':
        return decodeWalked(raw, checkMsgPack(raw, allocBound(Math.min(raw.length, stored))), true);
      case 'json': {
        if (raw.length > stored) checkJSON(raw, allocBound(stored));
        try {
          return JSON.parse(utf8.decode(raw));
        } catch (err) {
          throw new FormatError('ErrDeserialize', `json: ${(err as Error).message}`, { cause: err });
        }
      }
      case 'raw':
        return owned ? Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength) : Buffer.from(raw);
      case 'idlist':
        return decodeIDs(raw);
    }
  }
}

function serializerName(id: number): SerializerName | undefined {
  switch (id) {
    case 1:
      return 'msgpack';
    case 2:
      return 'json';
    case 3:
      return 'raw';
    case 4:
      return 'idlist';
    case 5:
      return 'string';
    case 6:
      return 'msgpack-array';
  }
  return undefined;
}

/** Thrown by decodeMsgPack for bytes that are not one standard msgpack value; the codec turns it into ErrDeserialize. */
export class MsgPackError extends Error {
  override name = 'MsgPackError';
}

/**
 * The extension types a reader accepts: the timestamp (-1) only, as Go's
 * decoder into `any`. @msgpack/msgpack would return any other type as an
 * ExtData, and msgpackr reads 0x42, 0x65, 0x69, 0x70, 0x73, 0x78, ... as
 * JavaScript objects (a Set, a RegExp, an Error); a Go writer never meant
 * either.
 */
class TimestampOnly extends ExtensionCodec {
  override decode(data: Uint8Array, type: number, context: undefined): unknown {
    if (type !== -1) throw new MsgPackError(`extension type ${type} (only the timestamp, -1, is standard)`);
    return super.decode(data, type, context);
  }
}

// One reused decoder: decode is synchronous, and @msgpack/msgpack clones the
// instance if it were ever re-entered. Its map keys are strings or numbers
// (anything else is an error), and a "__proto__" key is an error: the
// prototype of a decoded object is never set.
const reader = new Decoder({ extensionCodec: new TimestampOnly() });

/**
 * Decodes exactly one standard msgpack value from b (trailing bytes are an
 * error) with @msgpack/msgpack: maps as plain objects, 64-bit integers as
 * the nearest double, the timestamp extension (-1) as a Date, bin as a
 * Buffer of its own (never a view of b). Any other extension type, a map key
 * that is not a string or number, and a "__proto__" key throw MsgPackError.
 * It walks b with checkMsgPack first (Go's allocation bound and depth
 * limit), which throws a FormatError (ErrBomb).
 */
export function decodeMsgPack(b: Uint8Array): unknown {
  return decodeWalked(b, checkMsgPack(b), false);
}

/**
 * Decodes b, already walked by checkMsgPack (hasBin: what it returned).
 * Errors are MsgPackError, or FormatError ErrDeserialize for the codec.
 */
function decodeWalked(b: Uint8Array, hasBin: boolean, forCodec: boolean): unknown {
  let v: unknown;
  try {
    v = reader.decode(b);
  } catch (err) {
    const why = (err as Error).message;
    if (forCodec) throw new FormatError('ErrDeserialize', `msgpack: ${why}`, { cause: err });
    throw err instanceof MsgPackError ? err : new MsgPackError(why, { cause: err });
  }
  return hasBin ? ownBins(v) : v;
}

/**
 * Replaces the bin values @msgpack/msgpack returns (views of the input,
 * which may be the codec's scratch buffer) with Buffers of their own. Only
 * called when checkMsgPack saw a bin: a value without one is not walked.
 */
function ownBins(v: unknown): unknown {
  if (v instanceof Uint8Array) return Buffer.from(v);
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) v[i] = ownBins(v[i]);
  } else if (v !== null && typeof v === 'object' && !(v instanceof Date)) {
    const o = v as Record<string, unknown>;
    for (const k in o) o[k] = ownBins(o[k]);
  }
  return v;
}

/** A string with a lone surrogate has no UTF-8 form; it stays msgpack (as Go keeps invalid UTF-8 in msgpack). */
function hasLoneSurrogate(s: string): boolean {
  return /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);
}

function ratioTooHigh(rawLen: number, storedLen: number): boolean {
  return rawLen > RATIO_FLOOR && Math.floor(rawLen / MAX_RATIO) > storedLen;
}

/** idlist (serializer 4): a uvarint count, then zigzag varint deltas. */
function encodeIDs(v: unknown): Uint8Array {
  if (!Array.isArray(v)) throw new TypeError('kura: encode with idlist: want an array of integers');
  const out: number[] = [];
  pushUvarint(out, v.length);
  let prev = 0n;
  for (const x of v) {
    const id = typeof x === 'bigint' ? x : Number.isSafeInteger(x) ? BigInt(x) : undefined;
    if (id === undefined) throw new TypeError('kura: encode with idlist: want safe integers or bigints');
    let d = BigInt.asIntN(64, id - prev);
    prev = id;
    let z = BigInt.asUintN(64, (d << 1n) ^ (d >> 63n));
    while (z >= 0x80n) {
      out.push(Number(z & 0x7fn) | 0x80);
      z >>= 7n;
    }
    out.push(Number(z));
    d = 0n;
  }
  return Uint8Array.from(out);
}

function decodeIDs(b: Uint8Array): number[] {
  const c = readUvarint(b, 0);
  if (c.n <= 0) fail('ErrDeserialize', 'idlist: corrupt');
  let off = c.n;
  if (c.value > b.length - off) fail('ErrDeserialize', `idlist: ${c.value} ids claimed in ${b.length - off} bytes`);
  const out = new Array<number>(c.value);
  let prev = 0n;
  for (let i = 0; i < c.value; i++) {
    let z = 0n;
    let shift = 0n;
    let k = 0;
    for (;;) {
      if (off >= b.length || k >= 10) fail('ErrDeserialize', 'idlist: corrupt');
      const byte = b[off++];
      k++;
      z |= BigInt(byte & 0x7f) << shift;
      if (byte < 0x80) break;
      shift += 7n;
    }
    z = BigInt.asUintN(64, z);
    const d = (z >> 1n) ^ -(z & 1n);
    prev = BigInt.asIntN(64, prev + d);
    if (prev > BigInt(Number.MAX_SAFE_INTEGER) || prev < BigInt(Number.MIN_SAFE_INTEGER)) fail('ErrDeserialize', 'idlist: id beyond 2^53');
    out[i] = Number(prev);
  }
  if (off !== b.length) fail('ErrDeserialize', `idlist: ${b.length - off} bytes after the last id`);
  return out;
}
