/**
 * Zstandard for compressor id 2, over @bokuweb/zstd-wasm (libzstd compiled
 * to WebAssembly and shipped inside the npm package: no native build, no
 * download at install). Dictionaries, zstd-format or raw content, are
 * supported through ZSTD_(de)compress_usingDict.
 *
 * Decoding never trusts the frame: its declared content size, when
 * present, must equal the envelope's uncompressed length, and libzstd
 * writes into a buffer of exactly that length, so a frame can never produce
 * more than the header claims (which the codec checked against its limits).
 */

import { createRequire } from 'node:module';
import path from 'node:path';
import { S2CorruptError } from './s2.js';

const require = createRequire(import.meta.url);

interface ZstdModule {
  HEAPU8: Uint8Array;
  _malloc(n: number): number;
  _free(p: number): void;
  _ZSTD_isError(code: number): number;
  _ZSTD_compressBound(n: number): number;
  _ZSTD_createCCtx(): number;
  _ZSTD_createDCtx(): number;
  _ZSTD_compress(dst: number, cap: number, src: number, n: number, level: number): number;
  _ZSTD_compress_usingDict(cctx: number, dst: number, cap: number, src: number, n: number, dict: number, dn: number, level: number): number;
  _ZSTD_decompress(dst: number, cap: number, src: number, n: number): number;
  _ZSTD_decompress_usingDict(dctx: number, dst: number, cap: number, src: number, n: number, dict: number, dn: number): number;
}

let M: ZstdModule | undefined;
let loadError: unknown;
try {
  const lib = require('@bokuweb/zstd-wasm') as { init(): Promise<void> };
  await lib.init();
  // The package exports only its simple helpers, which size the output from
  // the frame itself; the module object lets us size it from the envelope.
  const modPath = path.join(path.dirname(require.resolve('@bokuweb/zstd-wasm')), 'module.js');
  M = (require(modPath) as { Module: ZstdModule }).Module;
} catch (err) {
  loadError = err;
}

/** Reports whether zstd is usable in this process (the WebAssembly module loaded). */
export function zstdAvailable(): boolean {
  return M !== undefined;
}

/** Why zstd is unavailable, if it is. */
export function zstdLoadError(): unknown {
  return loadError;
}

const ZSTD_MAGIC = 0xfd2fb528;

/** The parts of a frame header the codec checks. */
export interface FrameHeader {
  contentSize?: number;
  dictID: number;
}

/** Parses a zstd frame header (RFC 8878 §3.1.1); throws S2CorruptError-style errors for a bad one. */
export function zstdFrameHeader(b: Uint8Array): FrameHeader {
  if (b.length < 5) throw new S2CorruptError('zstd: frame header cut short');
  const magic = (b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24)) >>> 0;
  if (magic !== ZSTD_MAGIC) throw new S2CorruptError('zstd: not a frame');
  const fhd = b[4];
  if (fhd & 0x08) throw new S2CorruptError('zstd: reserved bit set');
  const fcsFlag = fhd >>> 6;
  const single = (fhd >>> 5) & 1;
  const didFlag = fhd & 3;
  let off = 5 + (single ? 0 : 1);
  const didSize = [0, 1, 2, 4][didFlag];
  const fcsSize = fcsFlag === 0 ? single : [0, 2, 4, 8][fcsFlag];
  if (off + didSize + fcsSize > b.length) throw new S2CorruptError('zstd: frame header cut short');
  let dictID = 0;
  for (let i = didSize - 1; i >= 0; i--) dictID = dictID * 256 + b[off + i];
  off += didSize;
  let contentSize: number | undefined;
  if (fcsSize > 0) {
    let v = 0;
    for (let i = fcsSize - 1; i >= 0; i--) v = v * 256 + b[off + i];
    if (fcsSize === 2) v += 256;
    contentSize = v;
  }
  return { contentSize, dictID };
}

/** A dictionary copied into the WebAssembly memory once. */
export class ZstdDict {
  readonly ptr: number;
  readonly size: number;
  readonly zstdFormat: boolean;
  constructor(bytes: Uint8Array) {
    if (!M) throw new Error('kura: zstd is not available');
    this.size = bytes.length;
    this.zstdFormat = isZstdDict(bytes);
    this.ptr = M._malloc(Math.max(1, bytes.length));
    M.HEAPU8.set(bytes, this.ptr);
  }
}

let dctx = 0;
let cctx = 0;

const ZSTD_DICT_MAGIC = 0xec30a437;

/** Reports whether bytes are a zstd-format dictionary (magic 37 A4 30 EC) rather than raw content. */
export function isZstdDict(b: Uint8Array): boolean {
  return b.length >= 8 && ((b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24)) >>> 0) === ZSTD_DICT_MAGIC;
}

/**
 * Removes the dictionary id from a frame header. libzstd refuses a frame
 * naming a dictionary id when the dictionary is raw content (whose id is
 * 0); klauspost/compress writes the envelope's id there for raw
 * dictionaries. The id is only a check, which the envelope already makes.
 */
function stripDictID(src: Uint8Array): Uint8Array {
  const fhd = src[4];
  const didSize = [0, 1, 2, 4][fhd & 3];
  if (didSize === 0) return src;
  const at = 5 + ((fhd >>> 5) & 1 ? 0 : 1);
  const out = new Uint8Array(src.length - didSize);
  out.set(src.subarray(0, at));
  out[4] = fhd & ~3;
  out.set(src.subarray(at + didSize), at);
  return out;
}

/**
 * Decompresses one frame into exactly rawLen bytes inside the WebAssembly
 * memory and hands that view to `use` before freeing it, so a payload the
 * caller refuses is never copied into the JS heap. `use` must copy what it
 * keeps. Throws S2CorruptError on any outcome but exactly rawLen bytes.
 */
export function zstdDecompress<T>(src: Uint8Array, rawLen: number, dict: ZstdDict | undefined, use: (raw: Uint8Array) => T): T {
  if (!M) throw new Error('kura: zstd is not available');
  const fh = zstdFrameHeader(src);
  if (fh.contentSize !== undefined && fh.contentSize !== rawLen) {
    throw new S2CorruptError(`zstd: frame claims ${fh.contentSize} bytes, header ${rawLen}`);
  }
  if (dict && !dict.zstdFormat && fh.dictID !== 0) src = stripDictID(src);
  const sp = M._malloc(src.length);
  const dp = M._malloc(Math.max(1, rawLen));
  try {
    M.HEAPU8.set(src, sp);
    let r: number;
    if (dict) {
      if (!dctx) dctx = M._ZSTD_createDCtx();
      r = M._ZSTD_decompress_usingDict(dctx, dp, rawLen, sp, src.length, dict.ptr, dict.size);
    } else {
      r = M._ZSTD_decompress(dp, rawLen, sp, src.length);
    }
    if (M._ZSTD_isError(r)) throw new S2CorruptError('zstd: corrupt frame');
    r >>>= 0;
    if (r !== rawLen) throw new S2CorruptError(`zstd: frame produced ${r} of ${rawLen} bytes`);
    return use(M.HEAPU8.subarray(dp, dp + r));
  } finally {
    M._free(dp);
    M._free(sp);
  }
}

/** Compresses src as one frame (content size written, no checksum: libzstd's defaults). */
export function zstdCompress(src: Uint8Array, level: number, dict?: ZstdDict): Buffer {
  if (!M) throw new Error('kura: zstd is not available');
  const cap = M._ZSTD_compressBound(src.length);
  const sp = M._malloc(Math.max(1, src.length));
  const dp = M._malloc(cap);
  try {
    M.HEAPU8.set(src, sp);
    let r: number;
    if (dict) {
      if (!cctx) cctx = M._ZSTD_createCCtx();
      r = M._ZSTD_compress_usingDict(cctx, dp, cap, sp, src.length, dict.ptr, dict.size, level);
    } else {
      r = M._ZSTD_compress(dp, cap, sp, src.length, level);
    }
    if (M._ZSTD_isError(r)) throw new Error('kura: zstd compression failed');
    r >>>= 0;
    return Buffer.from(M.HEAPU8.subarray(dp, dp + r));
  } finally {
    M._free(dp);
    M._free(sp);
  }
}
