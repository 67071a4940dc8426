/**
 * Snappy / S2 blocks, written from docs/FORMAT.md and the block format
 * description (no npm library decodes S2's extensions or its dictionaries).
 *
 * - s2Decode reads a Snappy block and S2's extended block format (the
 *   "repeat" copies), with or without an S2 dictionary, into a buffer of
 *   exactly the length the envelope claims.
 * - s2Encode writes a plain Snappy block (compressor id 1: any Snappy
 *   library reads it) or, with a dictionary, an S2 block whose copies may
 *   reach into the dictionary (compressor id 3, s2-dict).
 *
 * Neither trusts its input: every length and offset is checked before it is
 * used, and the decoder allocates only the output the caller sized.
 */

import { readUvarint, putUvarint } from './varint.js';

/** An S2 dictionary: the content and the initial repeat offset. */
export interface S2Dict {
  readonly content: Uint8Array;
  readonly repeat: number;
}

/** S2's dictionary bounds (klauspost/compress/s2 MinDictSize, MaxDictSize, MaxDictSrcOffset). */
export const S2_MIN_DICT = 16;
export const S2_MAX_DICT = 65536;
export const S2_MAX_DICT_SRC_OFFSET = 65535;

/** Thrown for a corrupt block; the codec turns it into ErrCorrupt. */
export class S2CorruptError extends Error {
  override name = 'S2CorruptError';
}

const corrupt = (why: string): never => {
  throw new S2CorruptError(`s2: corrupt input: ${why}`);
};

/**
 * Parses a dictionary in S2's serialized form (uvarint repeat offset, then
 * 16 B to 64 KiB of content). Returns undefined for bytes that are not one.
 */
export function parseS2Dict(b: Uint8Array): S2Dict | undefined {
  const r = readUvarint(b, 0);
  if (r.n <= 0) return undefined;
  const content = b.subarray(r.n);
  if (content.length < S2_MIN_DICT || content.length > S2_MAX_DICT) return undefined;
  if (r.value > content.length) return undefined;
  return { content, repeat: r.value };
}

/** Serializes a dictionary in S2's format. */
export function s2DictBytes(d: S2Dict): Uint8Array {
  const out = new Uint8Array(5 + d.content.length);
  const off = putUvarint(out, 0, d.repeat);
  out.set(d.content, off);
  return out.subarray(0, off + d.content.length);
}

/** Reads a block's length prefix; throws S2CorruptError for a bad one. */
export function s2DecodedLen(src: Uint8Array): { len: number; n: number } {
  const r = readUvarint(src, 0);
  if (r.n <= 0 || r.n > 5 || r.value > 0xffffffff) corrupt('length prefix');
  return { len: r.value, n: r.n };
}

/**
 * Decodes a block into a new buffer of exactly `rawLen` bytes. The block's
 * own length prefix must equal rawLen; the block must produce exactly that
 * many bytes. With `dict`, copies may reach into the dictionary as S2's
 * Dict.Decode allows. With `scratch` of at least rawLen bytes, the result is
 * a view of scratch (valid until the scratch is used again).
 */
export function s2Decode(src: Uint8Array, rawLen: number, dict?: S2Dict, scratch?: Buffer): Buffer {
  // No views are created on the way (each costs a few hundred ns, more than
  // decoding a small block): copies below 512 bytes run as loops.
  const lp = readUvarint(src, 0);
  if (lp.n <= 0 || lp.n > 5 || lp.value > 0xffffffff) corrupt('length prefix');
  const n = lp.n;
  if (lp.value !== rawLen) corrupt(`block claims ${lp.value} bytes, header ${rawLen}`);
  // Into the caller's scratch buffer when it is large enough (the codec
  // deserializes from it at once, copying out what it keeps): no allocation
  // on the hit path.
  const dst = scratch !== undefined && scratch.length >= rawLen ? scratch : Buffer.allocUnsafe(rawLen);
  const out = dst === scratch ? dst.subarray(0, rawLen) : dst;
  const dl = dict ? dict.content.length : 0;
  const dc = dict?.content;
  let offset = dict ? dl - dict.repeat : 0;
  let s = n;
  let d = 0;
  const sl = src.length;
  while (s < sl) {
    const tag = src[s];
    let length: number;
    switch (tag & 3) {
      case 0: {
        let x = tag >>> 2;
        if (x < 60) {
          s += 1;
        } else if (x === 60) {
          if (s + 2 > sl) corrupt('literal length');
          x = src[s + 1];
          s += 2;
        } else if (x === 61) {
          if (s + 3 > sl) corrupt('literal length');
          x = src[s + 1] | (src[s + 2] << 8);
          s += 3;
        } else if (x === 62) {
          if (s + 4 > sl) corrupt('literal length');
          x = src[s + 1] | (src[s + 2] << 8) | (src[s + 3] << 16);
          s += 4;
        } else {
          if (s + 5 > sl) corrupt('literal length');
          x = (src[s + 1] | (src[s + 2] << 8) | (src[s + 3] << 16) | (src[s + 4] << 24)) >>> 0;
          s += 5;
        }
        length = x + 1;
        if (length > rawLen - d || length > sl - s) corrupt('literal past the end');
        if (length < 512) {
          // A loop beats creating a subarray view for all but long literals.
          for (let i = 0; i < length; i++) dst[d + i] = src[s + i];
        } else {
          dst.set(src.subarray(s, s + length), d);
        }
        d += length;
        s += length;
        continue;
      }
      case 1: {
        if (s + 2 > sl) corrupt('copy1 cut short');
        const toffset = ((tag & 0xe0) << 3) | src[s + 1];
        length = (tag >>> 2) & 7;
        s += 2;
        if (toffset === 0) {
          // S2 repeat: keep the last offset; 5..7 extend the length.
          if (length === 5) {
            if (s + 1 > sl) corrupt('repeat cut short');
            length = src[s] + 4;
            s += 1;
          } else if (length === 6) {
            if (s + 2 > sl) corrupt('repeat cut short');
            length = (src[s] | (src[s + 1] << 8)) + (1 << 8);
            s += 2;
          } else if (length === 7) {
            if (s + 3 > sl) corrupt('repeat cut short');
            length = (src[s] | (src[s + 1] << 8) | (src[s + 2] << 16)) + (1 << 16);
            s += 3;
          }
        } else {
          offset = toffset;
        }
        length += 4;
        break;
      }
      case 2: {
        if (s + 3 > sl) corrupt('copy2 cut short');
        offset = src[s + 1] | (src[s + 2] << 8);
        length = 1 + (tag >>> 2);
        s += 3;
        break;
      }
      default: {
        if (s + 5 > sl) corrupt('copy4 cut short');
        offset = (src[s + 1] | (src[s + 2] << 8) | (src[s + 3] << 16) | (src[s + 4] << 24)) >>> 0;
        length = 1 + (tag >>> 2);
        s += 5;
      }
    }
    if (offset <= 0 || length > rawLen - d) corrupt('copy offset or length');
    if (d < offset) {
      if (!dc) corrupt('copy before the start');
      if (d > S2_MAX_DICT_SRC_OFFSET) corrupt('dictionary copy too far in');
      const start = dl - offset + d;
      if (start < 0 || start + length > dl) corrupt('dictionary copy out of range');
      for (let i = 0; i < length; i++) dst[d + i] = dc![start + i];
      d += length;
      continue;
    }
    if (length < 512) {
      // Short (possibly overlapping) copies run forward byte by byte.
      for (let i = 0; i < length; i++) dst[d + i] = dst[d - offset + i];
      d += length;
    } else if (offset >= length) {
      dst.copyWithin(d, d - offset, d - offset + length);
      d += length;
    } else {
      // Overlapping: the last `offset` bytes repeat. Copy the period, then
      // ever larger runs of what is already there (each run doubles).
      const from = d - offset;
      const end = d + length;
      while (d < end) {
        const n = Math.min(end - d, d - from);
        dst.copyWithin(d, from, from + n);
        d += n;
      }
    }
  }
  if (d !== rawLen) corrupt(`block produced ${d} of ${rawLen} bytes`);
  return out;
}

const HASH_BITS = 14;
const HASH_SIZE = 1 << HASH_BITS;
const hashTable = new Int32Array(HASH_SIZE);

const load32 = (b: Uint8Array, i: number): number => b[i] | (b[i + 1] << 8) | (b[i + 2] << 16) | (b[i + 3] << 24);
const hash4 = (x: number): number => Math.imul(x, 0x1e35a7bd) >>> (32 - HASH_BITS);

function emitLiteral(dst: Uint8Array, di: number, src: Uint8Array, from: number, to: number): number {
  const n = to - from - 1;
  if (n < 60) {
    dst[di++] = n << 2;
  } else if (n < 1 << 8) {
    dst[di++] = 60 << 2;
    dst[di++] = n;
  } else if (n < 1 << 16) {
    dst[di++] = 61 << 2;
    dst[di++] = n & 0xff;
    dst[di++] = n >>> 8;
  } else if (n < 1 << 24) {
    dst[di++] = 62 << 2;
    dst[di++] = n & 0xff;
    dst[di++] = (n >>> 8) & 0xff;
    dst[di++] = n >>> 16;
  } else {
    dst[di++] = 63 << 2;
    dst[di++] = n & 0xff;
    dst[di++] = (n >>> 8) & 0xff;
    dst[di++] = (n >>> 16) & 0xff;
    dst[di++] = n >>> 24;
  }
  dst.set(src.subarray(from, to), di);
  return di + (to - from);
}

function emitCopyChunk(dst: Uint8Array, di: number, offset: number, length: number): number {
  // length is 4..64 here.
  if (length < 12 && offset < 2048) {
    dst[di++] = 1 | ((length - 4) << 2) | ((offset >>> 8) << 5);
    dst[di++] = offset & 0xff;
  } else if (offset < 65536) {
    dst[di++] = 2 | ((length - 1) << 2);
    dst[di++] = offset & 0xff;
    dst[di++] = offset >>> 8;
  } else {
    dst[di++] = 3 | ((length - 1) << 2);
    dst[di++] = offset & 0xff;
    dst[di++] = (offset >>> 8) & 0xff;
    dst[di++] = (offset >>> 16) & 0xff;
    dst[di++] = offset >>> 24;
  }
  return di;
}

function emitCopy(dst: Uint8Array, di: number, offset: number, length: number): number {
  while (length >= 68) {
    di = emitCopyChunk(dst, di, offset, 64);
    length -= 64;
  }
  if (length > 64) {
    di = emitCopyChunk(dst, di, offset, 60);
    length -= 60;
  }
  return emitCopyChunk(dst, di, offset, length);
}

/** The most bytes s2Encode can produce for n input bytes. */
export function s2MaxEncodedLen(n: number): number {
  return 32 + n + Math.ceil(n / 6) + 5;
}

/**
 * Encodes src as one block. Without a dictionary the block is plain Snappy
 * (no S2 extensions), so every Snappy decoder reads it. With a dictionary,
 * copies reach into its content (only within the first 64 KiB of output, and
 * never across the dictionary's end, as S2's decoder requires).
 */
export function s2Encode(src: Uint8Array, dict?: S2Dict): Buffer {
  const n = src.length;
  const dst = Buffer.allocUnsafe(s2MaxEncodedLen(n));
  let di = putUvarint(dst, 0, n);
  if (n < 8) {
    if (n > 0) di = emitLiteral(dst, di, src, 0, n);
    return dst.subarray(0, di);
  }
  const table = hashTable;
  table.fill(-1);
  const dc = dict?.content;
  const dl = dc ? dc.length : 0;
  if (dc) {
    for (let p = 0; p + 4 <= dl; p++) table[hash4(load32(dc, p))] = p;
  }
  let lit = 0;
  let i = 0;
  const last = n - 4;
  while (i <= last) {
    const cur = load32(src, i);
    const h = hash4(cur);
    const cand = table[h];
    table[h] = dl + i;
    if (cand >= 0) {
      if (cand < dl) {
        if (i <= S2_MAX_DICT_SRC_OFFSET && cand + 4 <= dl && load32(dc!, cand) === cur) {
          let len = 4;
          while (cand + len < dl && i + len < n && dc![cand + len] === src[i + len]) len++;
          if (lit < i) di = emitLiteral(dst, di, src, lit, i);
          di = emitCopy(dst, di, dl + i - cand, len);
          i += len;
          lit = i;
          continue;
        }
      } else {
        const c = cand - dl;
        if (load32(src, c) === cur) {
          let len = 4;
          while (i + len < n && src[c + len] === src[i + len]) len++;
          if (lit < i) di = emitLiteral(dst, di, src, lit, i);
          di = emitCopy(dst, di, i - c, len);
          if (i + len - 1 <= last) table[hash4(load32(src, i + len - 1))] = dl + i + len - 1;
          i += len;
          lit = i;
          continue;
        }
      }
    }
    i += 1 + ((i - lit) >>> 5);
  }
  if (lit < n) di = emitLiteral(dst, di, src, lit, n);
  return dst.subarray(0, di);
}
