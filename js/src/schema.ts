/**
 * Schema fingerprints (docs/FORMAT.md, "Schema evolution").
 *
 * TypeScript types do not exist at run time, so a Node writer cannot derive
 * the description from its type the way Go's codec.SchemaOf does. It states
 * it instead, in the same grammar (`{"name":string,"age":int}`), and
 * {@link fingerprint} hashes it exactly as Go does (32-bit FNV-1a of the
 * UTF-8 bytes). A Node cache and a Go cache that describe the same shape
 * write the same fingerprint and read each other's entries with a plain
 * decode; a Node cache that states no schema writes no fingerprint, so Go
 * readers strict-decode its entries (an unknown field is a mismatch).
 */

/** FNV-1a (32 bit) of the UTF-8 bytes of a schema description, as Go's codec.Fingerprint computes it. */
export function fingerprint(description: string): number {
  let h = 0x811c9dc5;
  for (const c of Buffer.from(description, 'utf8')) {
    h ^= c;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/** Builders for descriptions in the Go grammar, so a description reads like the type. */
export const schema = {
  bool: 'bool',
  int: 'int',
  float: 'float',
  string: 'string',
  bytes: 'bytes',
  any: 'any',
  /** `[]` + element. */
  list: (elem: string): string => `[]${elem}`,
  /** `map[K]E`. */
  map: (key: string, elem: string): string => `map[${key}]${elem}`,
  /** A struct: fields in the writer's order, by their encoded names. */
  struct: (fields: ReadonlyArray<readonly [string, string]>): string =>
    `{${fields.map(([name, t]) => `${JSON.stringify(name)}:${t}`).join(',')}}`,
  /** A type that encodes itself, e.g. custom('time.Time'). */
  custom: (qualifiedName: string): string => `custom(${qualifiedName})`,
} as const;
