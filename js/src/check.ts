/**
 * Bounds a decode before it runs: the same walks as the Go reader
 * (codec.CheckMsgPack, checkJSON), so a few hostile bytes under a key never
 * cost a Node reader more than a small multiple of their size.
 */

import { FormatError } from './errors.js';

/** Most nesting levels of msgpack arrays and maps (Go: codec.DefaultMaxDepth). */
export const MAX_DEPTH = 256;

// Costs in units of 32 bytes, so the running estimate stays a small integer
// (no heap-allocated doubles while walking a hostile payload).
const UNIT = 32;
const COST_VALUE = 1; // 32 bytes: an interface slot, a string header
const COST_ARRAY = 1; // 32 bytes: a slice header
const COST_MAP = 12; // 384 bytes: an empty map, then its first group
const COST_PAIR = 2; // 64 bytes: each entry as the map grows
const COST_JSON_VALUE = 96;

/** The allocation a decode of n stored bytes may cost: 64 bytes per byte + 1 MiB (Go: codec.AllocBound). */
export function allocBound(n: number): number {
  return 64 * n + (1 << 20);
}

const lenWidth = new Uint8Array(256);
lenWidth[0xc4] = lenWidth[0xd9] = lenWidth[0xc7] = 1;
lenWidth[0xc5] = lenWidth[0xda] = lenWidth[0xc8] = 2;
lenWidth[0xc6] = lenWidth[0xdb] = lenWidth[0xc9] = 4;

const walkStack = new Int32Array(MAX_DEPTH + 1);

const bomb = (why: string): never => {
  throw new FormatError('ErrBomb', `msgpack: ${why}`);
};

/**
 * Walks one msgpack value without building it and throws ErrBomb when a
 * count or length claims more than the bytes left, nesting passes
 * MAX_DEPTH, 0xC1 appears, the value ends early, or decoding it would
 * allocate more than `limit` bytes (estimated as the Go reader does).
 * Returns whether the value holds a bin (the decoder's bin values are views
 * of b, which the codec then copies).
 */
export function checkMsgPack(b: Uint8Array, limitBytes: number = allocBound(b.length)): boolean {
  const limit = Math.floor(limitBytes / UNIT);
  const stack = walkStack; // reused: the walk is synchronous and never re-entered
  let est = 0;
  let depth = 0;
  let hasBin = false;
  stack[0] = 1;
  let off = 0;
  const len = b.length;
  for (;;) {
    while (depth >= 0 && stack[depth] === 0) depth--;
    if (depth < 0) {
      if (est > limit) bomb(`decoding would allocate more than ${limitBytes} bytes`);
      return hasBin;
    }
    stack[depth]--;
    est += COST_VALUE;
    if (est > limit) bomb(`decoding would allocate more than ${limitBytes} bytes`);
    if (off >= len) bomb('ends inside a value');
    const c = b[off++];
    let n = 0;
    let skip = 0;
    let isMap = false;
    let isArr = false;
    if (c <= 0x7f || c >= 0xe0) {
      // fixint
    } else if (c <= 0x8f) {
      isMap = true;
      n = c & 0x0f;
    } else if (c <= 0x9f) {
      isArr = true;
      n = c & 0x0f;
    } else if (c <= 0xbf) {
      skip = c & 0x1f;
    } else {
      switch (c) {
        case 0xc0:
        case 0xc2:
        case 0xc3:
          break;
        case 0xc1:
          bomb('byte 0xc1 is never used');
          break;
        case 0xcc:
        case 0xd0:
          skip = 1;
          break;
        case 0xcd:
        case 0xd1:
          skip = 2;
          break;
        case 0xca:
        case 0xce:
        case 0xd2:
          skip = 4;
          break;
        case 0xcb:
        case 0xcf:
        case 0xd3:
          skip = 8;
          break;
        case 0xd4:
        case 0xd5:
        case 0xd6:
        case 0xd7:
        case 0xd8:
          skip = 1 + (1 << (c - 0xd4));
          break;
        case 0xdc:
        case 0xde:
          if (off + 2 > len) bomb('count cut short');
          n = (b[off] << 8) | b[off + 1];
          off += 2;
          isArr = c === 0xdc;
          isMap = c === 0xde;
          break;
        case 0xdd:
        case 0xdf:
          if (off + 4 > len) bomb('count cut short');
          {
            // A 32-bit count can exceed the small-integer range; refuse it
            // here so the walk's arithmetic never turns into heap numbers.
            const v = ((b[off] << 24) | (b[off + 1] << 16) | (b[off + 2] << 8) | b[off + 3]) >>> 0;
            off += 4;
            if (v > len) bomb(`count ${v} beyond the input`);
            n = v | 0;
          }
          isArr = c === 0xdd;
          isMap = c === 0xdf;
          break;
        default: {
          if (c === 0xc4 || c === 0xc5 || c === 0xc6) hasBin = true;
          const w = lenWidth[c];
          if (off + w > len) bomb('length cut short');
          let l = 0;
          for (let i = 0; i < w; i++) l = l * 256 + b[off + i];
          off += w;
          if (l > len) bomb(`value claims ${l} bytes beyond the input`);
          skip = l | 0;
          if (c === 0xc7 || c === 0xc8 || c === 0xc9) skip++;
        }
      }
    }
    const rest = len - off;
    if (isArr || isMap) {
      const need = isMap ? 2 * n : n;
      if (need > rest) bomb(`${isMap ? 'map' : 'array'} claims ${n} entries in ${rest} bytes`);
      est += isMap ? COST_MAP + COST_PAIR * n : COST_ARRAY;
      if (est > limit) bomb(`decoding would allocate more than ${limitBytes} bytes`);
      if (n === 0) continue;
      if (depth + 1 > MAX_DEPTH) bomb(`nests deeper than ${MAX_DEPTH} levels`);
      depth++;
      stack[depth] = need;
    } else if (skip > rest) {
      bomb(`value claims ${skip} bytes, ${rest} remain`);
    } else {
      off += skip;
    }
  }
}

/** Throws ErrBomb when parsing JSON b would allocate more than limit (Go: checkJSON). */
export function checkJSON(b: Uint8Array, limit: number): void {
  let values = 0;
  let inStr = false;
  let esc = false;
  for (let i = 0; i < b.length; i++) {
    const c = b[i];
    if (inStr) {
      if (esc) esc = false;
      else if (c === 0x5c) esc = true;
      else if (c === 0x22) inStr = false;
      continue;
    }
    if (c === 0x22) inStr = true;
    else if (c === 0x2c || c === 0x3a || c === 0x5b || c === 0x7b) values++;
  }
  if (b.length + COST_JSON_VALUE * values > limit) throw new FormatError('ErrBomb', `json: decoding would allocate more than ${limit} bytes`);
}
