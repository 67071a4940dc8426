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

/**
 * Published schemas (docs/FORMAT.md, "Published schemas"): a Go writer with
 * the compact envelope stores a struct as the array of its field values and
 * may publish its type's description under "kura:schema:" + the
 * fingerprint (Go's dictstore.Registry.PublishSchema). A Node cache with
 * `namedFields` reads it, checks that it hashes to the entry's fingerprint,
 * parses it ({@link parseSchema}) and gives the arrays their field names
 * ({@link named}); a value of another shape is an error, never a guess.
 */

/** A parsed schema description (Go: codec.Schema). */
export type SchemaNode =
  | { kind: 'bool' | 'int' | 'float' | 'complex' | 'string' | 'bytes' | 'any' }
  | { kind: 'slice'; elem: SchemaNode }
  | { kind: 'map'; key: SchemaNode; elem: SchemaNode }
  | { kind: 'struct'; fields: { name: string; type: SchemaNode }[] }
  | { kind: 'ref'; ref: number }
  | { kind: 'custom' | 'invalid'; name: string };

/** The longest description parseSchema takes (UTF-8 bytes), and its deepest nesting (Go's MaxSchemaLen, MaxSchemaDepth). */
export const MAX_SCHEMA_LEN = 64 << 10;
export const MAX_SCHEMA_DEPTH = 64;
const MAX_NAME_DEPTH = 4096;

/** A description that is not Go's grammar, or a value of another shape than its schema (Go: codec.ErrSchemaDescription). */
export class SchemaError extends Error {
  override name = 'SchemaError';
}

const SCALARS = ['bool', 'int', 'float', 'complex', 'string', 'bytes', 'any'] as const;

/** Parses a description Go's codec.SchemaOf wrote (Go: codec.ParseSchema). Throws SchemaError. */
export function parseSchema(desc: string): SchemaNode {
  if (Buffer.byteLength(desc, 'utf8') > MAX_SCHEMA_LEN) throw new SchemaError(`schema description: ${Buffer.byteLength(desc, 'utf8')} bytes, over ${MAX_SCHEMA_LEN}`);
  let i = 0;
  const err = (why: string): never => {
    throw new SchemaError(`schema description: at character ${i}: ${why}`);
  };
  const take = (p: string): boolean => {
    if (desc.startsWith(p, i)) {
      i += p.length;
      return true;
    }
    return false;
  };
  const quoted = (): string => {
    if (desc[i] !== '"') err('field name not quoted');
    i++;
    const bytes: number[] = [];
    const hex = (n: number): number => {
      const h = desc.slice(i, i + n);
      if (h.length !== n || !/^[0-9a-fA-F]+$/.test(h)) err('bad escape in a field name');
      i += n;
      return parseInt(h, 16);
    };
    const pushRune = (r: number) => {
      if (r > 0x10ffff || (r >= 0xd800 && r < 0xe000)) err('bad escape in a field name');
      bytes.push(...Buffer.from(String.fromCodePoint(r), 'utf8'));
    };
    for (;;) {
      if (i >= desc.length) err('field name not closed');
      const c = desc[i];
      if (c === '"') {
        i++;
        return Buffer.from(bytes).toString('utf8');
      }
      if (c === '\n') err('newline in a field name');
      if (c !== '\\') {
        const r = desc.codePointAt(i)!;
        i += r > 0xffff ? 2 : 1;
        pushRune(r);
        continue;
      }
      i++;
      const e = desc[i++];
      switch (e) {
        case 'a': bytes.push(7); break;
        case 'b': bytes.push(8); break;
        case 'f': bytes.push(12); break;
        case 'n': bytes.push(10); break;
        case 'r': bytes.push(13); break;
        case 't': bytes.push(9); break;
        case 'v': bytes.push(11); break;
        case '\\': bytes.push(0x5c); break;
        case '"': bytes.push(0x22); break;
        case 'x': bytes.push(hex(2)); break;
        case 'u': pushRune(hex(4)); break;
        case 'U': pushRune(hex(8)); break;
        default: {
          if (e === undefined || e < '0' || e > '7') err('bad escape in a field name');
          const o = desc.slice(i - 1, i + 2);
          if (!/^[0-7]{3}$/.test(o) || parseInt(o, 8) > 255) err('bad escape in a field name');
          bytes.push(parseInt(o, 8));
          i += 2;
        }
      }
    }
  };
  const named = (kind: 'custom' | 'invalid'): SchemaNode => {
    const start = i;
    let open = 1;
    for (; i < desc.length; i++) {
      if (desc[i] === '(') open++;
      else if (desc[i] === ')') open--;
      if (open === 0) break;
    }
    if (open !== 0) err(`${kind}( not closed`);
    const name = desc.slice(start, i);
    i++;
    return { kind, name };
  };
  const parse = (depth: number, structs: number): SchemaNode => {
    if (depth > MAX_SCHEMA_DEPTH) err(`nested over ${MAX_SCHEMA_DEPTH} levels`);
    for (const k of SCALARS) if (take(k)) return { kind: k };
    if (take('[]')) return { kind: 'slice', elem: parse(depth + 1, structs) };
    if (take('map[')) {
      const key = parse(depth + 1, structs);
      if (!take(']')) err('map key not closed by ]');
      return { kind: 'map', key, elem: parse(depth + 1, structs) };
    }
    if (take('{')) {
      const fields: { name: string; type: SchemaNode }[] = [];
      while (!take('}')) {
        if (fields.length > 0 && !take(',')) err('fields not separated by ,');
        const name = quoted();
        if (!take(':')) err(`field ${JSON.stringify(name)} has no :`);
        fields.push({ name, type: parse(depth + 1, structs + 1) });
      }
      return { kind: 'struct', fields };
    }
    if (take('@')) {
      const m = /^[0-9]+/.exec(desc.slice(i, i + 12));
      const n = m ? Number(m[0]) : NaN;
      if (m) i += m[0].length;
      if (!(n < structs)) err(`reference @${m ? m[0] : ''} to no struct around it`);
      return { kind: 'ref', ref: n };
    }
    if (take('custom(')) return named('custom');
    if (take('invalid(')) return named('invalid');
    return err('no type');
  };
  const s = parse(0, 0);
  if (i !== desc.length) err('text after the description');
  return s;
}

const shapeOf = (v: unknown): string =>
  Array.isArray(v) ? `an array of ${v.length}` : v instanceof Uint8Array ? 'bytes' : v !== null && typeof v === 'object' ? 'a map' : `a ${typeof v}`;

/**
 * Gives a value decoded from a msgpack-array entry (every struct an array of
 * its field values) the field names of its schema: each struct becomes an
 * object (Go: codec.Schema.Named). A value of another shape throws
 * SchemaError; null stands for any value (a nil pointer, slice or map).
 */
export function named(s: SchemaNode, v: unknown): unknown {
  const walk = (s: SchemaNode, v: unknown, stack: SchemaNode[], depth: number): unknown => {
    if (v === null || v === undefined) return null;
    if (depth > MAX_NAME_DEPTH) throw new SchemaError('value nested deeper than its schema allows');
    const mismatch = (what: string): never => {
      throw new SchemaError(`${what}, the value is ${shapeOf(v)}`);
    };
    switch (s.kind) {
      case 'ref':
        if (s.ref >= stack.length) throw new SchemaError(`reference @${s.ref} to no struct`);
        return walk(stack[s.ref], v, stack.slice(0, s.ref), depth + 1);
      case 'struct': {
        if (!Array.isArray(v) || v.length !== s.fields.length) return mismatch(`a struct of ${s.fields.length} fields`);
        const inner = [...stack, s];
        const out: Record<string, unknown> = {};
        s.fields.forEach((f, i) => {
          if (f.name === '__proto__') throw new SchemaError('a field named __proto__');
          try {
            out[f.name] = walk(f.type, v[i], inner, depth + 1);
          } catch (e) {
            if (e instanceof SchemaError) throw new SchemaError(`${f.name}: ${e.message}`);
            throw e;
          }
        });
        return out;
      }
      case 'slice':
        if (v instanceof Uint8Array) return v; // a byte array, as bin
        if (!Array.isArray(v)) return mismatch('a slice');
        return v.map((e) => walk(s.elem, e, stack, depth + 1));
      case 'map': {
        if (typeof v !== 'object' || Array.isArray(v) || v instanceof Uint8Array || v instanceof Date) return mismatch('a map');
        const out: Record<string, unknown> = {};
        for (const [k, e] of Object.entries(v as Record<string, unknown>)) out[k] = walk(s.elem, e, stack, depth + 1);
        return out;
      }
      case 'invalid':
        throw new SchemaError(`invalid(${s.name}) holds no value`);
      case 'bool':
        return typeof v === 'boolean' ? v : mismatch('bool');
      case 'int':
        return (typeof v === 'number' && Number.isInteger(v)) || typeof v === 'bigint' ? v : mismatch('int');
      case 'float':
        return typeof v === 'number' ? v : mismatch('float');
      case 'string':
        return typeof v === 'string' ? v : mismatch('string');
      case 'bytes':
        return v instanceof Uint8Array ? v : mismatch('bytes');
    }
    return v; // any, complex, custom: as decoded
  };
  return walk(s, v, [], 0);
}
