/**
 * Error classes of the value format. Every decode failure is a
 * {@link FormatError} whose `code` names the Go sentinel it matches
 * (docs/FORMAT.md, "Decoding rules"), so a Node and a Go reader classify
 * the same bytes the same way.
 *
 * - `notUnderstood` entries (a newer version, an unknown kind, an unknown
 *   critical field) are a miss the reader must **not** overwrite.
 * - every other code is **malformed**: a miss that may be overwritten.
 */

/** The Go sentinel names a decode failure can carry. */
export type FormatErrorCode =
  | 'ErrNotKura'
  | 'ErrTruncated'
  | 'ErrCorrupt'
  | 'ErrUnsupportedVersion'
  | 'ErrNotUnderstood'
  | 'ErrUnknownSerializer'
  | 'ErrUnknownCompressor'
  | 'ErrUnknownDictionary'
  | 'ErrTooLarge'
  | 'ErrBomb'
  | 'ErrDeserialize'
  | 'ErrSchemaMismatch';

const notUnderstoodCodes = new Set<FormatErrorCode>(['ErrUnsupportedVersion', 'ErrNotUnderstood']);

/** A value the reader could not decode. Check `notUnderstood` before overwriting the key. */
export class FormatError extends Error {
  override name = 'FormatError';
  /** The Go sentinel this failure matches (`ErrCorrupt`, `ErrBomb`, ...). */
  readonly code: FormatErrorCode;
  /** True for entries a newer writer wrote: a miss that must not be overwritten. */
  readonly notUnderstood: boolean;

  constructor(code: FormatErrorCode, detail: string, options?: { cause?: unknown }) {
    super(`kura: ${detail}`, options);
    this.code = code;
    this.notUnderstood = notUnderstoodCodes.has(code);
  }

  /** True for malformed bytes (anything but "not understood"). */
  get malformed(): boolean {
    return !this.notUnderstood;
  }
}

/** Reports whether err is a FormatError (optionally with the given code). */
export function isFormatError(err: unknown, code?: FormatErrorCode): err is FormatError {
  return err instanceof FormatError && (code === undefined || err.code === code);
}

/** A value too large to store (encoded size above the cache's MaxValueSize). */
export class ValueTooLargeError extends Error {
  override name = 'ValueTooLargeError';
  constructor(readonly size: number, readonly limit: number) {
    super(`kura: value of ${size} bytes exceeds the limit of ${limit}`);
  }
}
