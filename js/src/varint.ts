/**
 * Unsigned LEB128 varints, as Go's encoding/binary writes them. Values are
 * JS numbers: every length and id the format holds fits in 2^53.
 */

/** Result of reading a uvarint: the value and the number of bytes read (0: input ended; -1: overflow past 64 bits / 10 bytes). */
export interface Uvarint {
  value: number;
  n: number;
}

/**
 * Reads a uvarint at `off`. n is 0 when the bytes end inside the varint and
 * -1 when it is longer than 10 bytes or exceeds 64 bits, exactly as Go's
 * binary.Uvarint reports it. value is approximate above 2^53 (callers
 * compare it against limits far below that).
 */
export function readUvarint(b: Uint8Array, off: number): Uvarint {
  let x = 0;
  let mul = 1;
  for (let i = 0; i < 10; i++) {
    if (off + i >= b.length) return { value: 0, n: 0 };
    const c = b[off + i];
    if (c < 0x80) {
      if (i === 9 && c > 1) return { value: 0, n: -1 };
      return { value: x + c * mul, n: i + 1 };
    }
    x += (c & 0x7f) * mul;
    mul *= 128;
  }
  return { value: 0, n: -1 };
}

/** Bytes a uvarint of x takes. */
export function uvarintLen(x: number): number {
  let n = 1;
  while (x >= 0x80) {
    x = Math.floor(x / 128);
    n++;
  }
  return n;
}

/** Appends the uvarint of a non-negative safe integer x to out. */
export function pushUvarint(out: number[], x: number): void {
  while (x >= 0x80) {
    out.push((x % 128) | 0x80);
    x = Math.floor(x / 128);
  }
  out.push(x);
}

/** Writes the uvarint of x into b at off; returns the offset after it. */
export function putUvarint(b: Uint8Array, off: number, x: number): number {
  while (x >= 0x80) {
    b[off++] = (x % 128) | 0x80;
    x = Math.floor(x / 128);
  }
  b[off++] = x;
  return off;
}
