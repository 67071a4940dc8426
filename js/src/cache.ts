/**
 * The read-through cache: fetch and fetchMany over a Store, with the value
 * format of the Go package, negative caching, TTL jitter, size guards,
 * invalidation and stats.
 *
 * fetch and fetchMany never reject with a store error: a failed, timed-out
 * or skipped read is a miss and the loader serves the value; a failed
 * write-back is dropped (and counted). Only the loader's errors (and the
 * caller's own AbortSignal) reach the caller.
 */

import { Codec, type Fields, type Header } from './codec.js';
import { FormatError } from './errors.js';
import { fingerprint } from './schema.js';
import { groupByNode, type SetItem, type Store } from './store.js';

/** Defaults of CacheOptions (the Go package's). */
export const cacheDefaults = {
  negativeTtl: 60_000,
  maxValueSize: 4 << 20,
  warnValueSize: 100 << 10,
  storeTimeout: 250,
  loadTimeout: 30_000,
  schemaGrace: 60_000,
} as const;

/** What a cache operation was doing when onError is called. */
export type Op = 'get' | 'set' | 'delete' | 'decode' | 'encode';

/** Options of a Cache. Every field may be left out; the default is named on it. */
export interface CacheOptions<V> {
  /** A name for stats. Default "default". */
  name?: string;
  /** The envelope codec. Default: msgpack + s2 (Go's default). */
  codec?: Codec;
  /** TTL of values (ms). Default 0: no expiry. */
  ttl?: number;
  /** TTL of cached "not found" entries (ms). Default 60 000. */
  negativeTtl?: number;
  /** Shortens each TTL by a random fraction in [0, ttlJitter) so keys written together do not expire together. Default 0. */
  ttlJitter?: number;
  /** Encoded values larger than this are not stored (counted in stats.rejected). Default 4 MiB. */
  maxValueSize?: number;
  /** onLargeValue is called for values larger than this. Default 100 KiB. */
  warnValueSize?: number;
  /** Called with the key and size of a value above warnValueSize (never with the value). */
  onLargeValue?: (key: string, size: number) => void;
  /** Called for every store and decode error fetch hides from its caller. */
  onError?: (op: Op, key: string, err: unknown) => void;
  /** Time budget of one store round trip (ms); past it a read is a miss and a write is dropped. Default 250. */
  storeTimeout?: number;
  /** Time budget of one loader call (ms); its AbortSignal fires then. Default 30 000. */
  loadTimeout?: number;
  /**
   * The schema description of V in the Go grammar (docs/FORMAT.md), e.g.
   * `{"id":int,"name":string}`; its fingerprint is written into every value.
   * Default: none (no fingerprint written; every value is accepted).
   */
  schema?: string;
  /**
   * Checks a value written by another schema (or none). A value that fails
   * is a schema mismatch: a miss, refilled by the loader. Default: values
   * whose fingerprint differs from `schema` are mismatches; values without
   * one are accepted.
   */
  validate?: (v: unknown) => boolean;
  /** A mismatched entry younger than this is not overwritten (ms; rolling deploys). Default 60 000; negative: off. */
  schemaGrace?: number;
}

/** Per-call options of fetch and fetchMany. */
export interface FetchOptions {
  /** TTL for values this call loads (ms). Default: the cache's ttl. */
  ttl?: number;
  /** Aborts the caller's wait (the load itself goes on for other callers). */
  signal?: AbortSignal;
}

/** Loads one key; resolves undefined for "not found" (cached as a negative entry). */
export type Loader<V> = (key: string, signal: AbortSignal) => Promise<V | undefined>;
/** Loads many keys in one call; keys missing from the result are "not found". */
export type ManyLoader<V> = (keys: string[], signal: AbortSignal) => Promise<Map<string, V> | Record<string, V>>;

/** Counters; a snapshot from Cache.stats(). */
export interface CacheStats {
  name: string;
  hits: number;
  misses: number;
  negativeHits: number;
  decodeErrors: number;
  notUnderstood: number;
  schemaMismatches: number;
  schemaKept: number;
  storeErrors: number;
  loads: number;
  loadErrors: number;
  /** Keys that joined a load already running in this process. */
  shared: number;
  writes: number;
  writeErrors: number;
  rejected: number;
  bytesRead: number;
  bytesWritten: number;
}

/** The loader's outcome for one key. */
interface Loaded<V> {
  found: boolean;
  value?: V;
}

/** A load running in this process for a set of keys; voided by invalidate. */
interface Flight<V> {
  keys: Set<string>;
  voided: Set<string>;
  result: Promise<Map<string, Loaded<V>>>;
}

/** How a cached read of one key turned out. */
type Read<V> =
  | { kind: 'hit'; value: V }
  | { kind: 'negative' }
  | { kind: 'miss'; write: boolean };

class Timeout extends Error {
  override name = 'TimeoutError';
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let t: NodeJS.Timeout;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      t = setTimeout(() => reject(new Timeout(`kura: store call took longer than ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(t));
}

function abortable<T>(p: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return p;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

/**
 * A read-through cache of values of type V on a Store.
 *
 * ```ts
 * const users = new Cache<User>(store, { ttl: 60_000, name: 'users' });
 * const u = await users.fetch(`user:${id}`, () => db.user(id));
 * ```
 */
export class Cache<V> {
  readonly name: string;
  private readonly codec: Codec;
  private readonly o: Required<Pick<CacheOptions<V>, 'ttl' | 'negativeTtl' | 'ttlJitter' | 'maxValueSize' | 'warnValueSize' | 'storeTimeout' | 'loadTimeout' | 'schemaGrace'>>;
  private readonly schemaFp?: number;
  private readonly flights = new Map<string, Flight<V>>();
  private readonly c = {
    hits: 0, misses: 0, negativeHits: 0, decodeErrors: 0, notUnderstood: 0, schemaMismatches: 0, schemaKept: 0,
    storeErrors: 0, loads: 0, loadErrors: 0, shared: 0, writes: 0, writeErrors: 0, rejected: 0, bytesRead: 0, bytesWritten: 0,
  };

  constructor(readonly store: Store, private readonly opts: CacheOptions<V> = {}) {
    this.name = opts.name || 'default';
    this.codec = opts.codec ?? new Codec();
    const num = (k: keyof CacheOptions<V>, v: number | undefined, def: number, allowNeg = false): number => {
      if (v === undefined || v === 0) return def;
      if (Number.isNaN(v) || (!allowNeg && v < 0)) throw new Error(`kura: options.${String(k)}: ${v}; want a non-negative number`);
      return v;
    };
    const ttl = opts.ttl ?? 0;
    if (!(ttl >= 0)) throw new Error(`kura: options.ttl must not be negative, got ${ttl} (0 for no expiry)`);
    const j = opts.ttlJitter ?? 0;
    if (!(j >= 0 && j < 1)) throw new Error(`kura: options.ttlJitter must be in [0, 1), got ${j}`);
    this.o = {
      ttl,
      ttlJitter: j,
      negativeTtl: num('negativeTtl', opts.negativeTtl, cacheDefaults.negativeTtl),
      maxValueSize: num('maxValueSize', opts.maxValueSize, cacheDefaults.maxValueSize),
      warnValueSize: num('warnValueSize', opts.warnValueSize, cacheDefaults.warnValueSize),
      storeTimeout: num('storeTimeout', opts.storeTimeout, cacheDefaults.storeTimeout),
      loadTimeout: num('loadTimeout', opts.loadTimeout, cacheDefaults.loadTimeout),
      schemaGrace: num('schemaGrace', opts.schemaGrace, cacheDefaults.schemaGrace, true),
    };
    if (opts.schema !== undefined) this.schemaFp = fingerprint(opts.schema);
  }

  /** A snapshot of the counters. */
  stats(): CacheStats {
    return { name: this.name, ...this.c };
  }

  /** The TTL a write gets: ttl shortened by the jitter (never below 1 ms). */
  jitter(ttl: number): number {
    if (this.o.ttlJitter === 0 || ttl <= 0) return ttl;
    const d = Math.random() * this.o.ttlJitter * ttl;
    return ttl - d < 1 ? ttl : ttl - d;
  }

  private report(op: Op, key: string, err: unknown): void {
    try {
      this.opts.onError?.(op, key, err);
    } catch {
      // A throwing callback must not turn a hidden error into a visible one.
    }
  }

  /** Reads keys in one round trip per node; store errors become misses. */
  private async readRaw(keys: string[]): Promise<(Buffer | null | Error)[]> {
    const out: (Buffer | null | Error)[] = new Array(keys.length).fill(null);
    const groups = groupByNode(this.store, keys);
    await Promise.all(
      [...groups].map(async ([node, idx]) => {
        const ks = idx.map((i) => keys[i]);
        try {
          const vals = await withTimeout(this.store.getBatch(node, ks), this.o.storeTimeout);
          idx.forEach((i, j) => (out[i] = vals[j]));
        } catch (err) {
          if (err instanceof Timeout) this.store.timedOut?.(node, err);
          for (const i of idx) out[i] = err instanceof Error ? err : new Error(String(err));
        }
      }),
    );
    return out;
  }

  /** Classifies one stored entry. */
  private classify(key: string, b: Buffer | null | Error): Read<V> {
    if (b instanceof Error) {
      this.c.storeErrors++;
      this.c.misses++;
      this.report('get', key, b);
      return { kind: 'miss', write: true };
    }
    if (b === null) {
      this.c.misses++;
      return { kind: 'miss', write: true };
    }
    this.c.bytesRead += b.length;
    let h: Header;
    let value: unknown;
    try {
      const d = this.codec.decode(b);
      h = d.header;
      if (d.kind === 'negative') {
        this.c.negativeHits++;
        return { kind: 'negative' };
      }
      if (d.kind !== 'value') {
        // A lease or a tombstone: a miss the fill may replace.
        this.c.misses++;
        return { kind: 'miss', write: true };
      }
      value = d.value;
    } catch (err) {
      this.c.misses++;
      if (err instanceof FormatError && err.notUnderstood) {
        // A newer writer's entry: never overwrite it.
        this.c.notUnderstood++;
        this.report('decode', key, err);
        return { kind: 'miss', write: false };
      }
      this.c.decodeErrors++;
      this.report('decode', key, err);
      return { kind: 'miss', write: true };
    }
    if (!this.schemaOK(h, value)) {
      this.c.schemaMismatches++;
      this.c.misses++;
      const w = h.fields.written;
      const fresh = this.o.schemaGrace > 0 && w !== undefined && Date.now() - w < this.o.schemaGrace && w <= Date.now() + this.o.schemaGrace;
      if (fresh) this.c.schemaKept++;
      return { kind: 'miss', write: !fresh };
    }
    this.c.hits++;
    return { kind: 'hit', value: value as V };
  }

  private schemaOK(h: Header, v: unknown): boolean {
    const fp = h.fields.schema;
    if (this.schemaFp !== undefined && fp === this.schemaFp) return true;
    if (this.opts.validate) {
      try {
        return this.opts.validate(v);
      } catch {
        return false;
      }
    }
    return this.schemaFp === undefined || fp === undefined;
  }

  /** Encodes a value with the cache's fields; undefined if the size guard refuses it. */
  private encodeValue(key: string, v: V, fields: Fields): Buffer | undefined {
    let b: Buffer;
    try {
      b = this.codec.encode(v, { ...fields, schema: this.schemaFp });
    } catch (err) {
      this.c.rejected++;
      this.report('encode', key, err);
      return undefined;
    }
    if (b.length > this.o.warnValueSize) {
      try {
        this.opts.onLargeValue?.(key, b.length);
      } catch {
        /* see report */
      }
    }
    if (b.length > this.o.maxValueSize) {
      this.c.rejected++;
      return undefined;
    }
    return b;
  }

  /** Writes items, one round trip per node; errors are counted, never thrown. */
  private async writeBack(items: SetItem[]): Promise<void> {
    if (items.length === 0) return;
    const groups = groupByNode(this.store, items.map((i) => i.key));
    await Promise.all(
      [...groups].map(async ([node, idx]) => {
        const batch = idx.map((i) => items[i]);
        try {
          await withTimeout(this.store.setBatch(node, batch), this.o.storeTimeout);
          this.c.writes += batch.length;
          for (const it of batch) this.c.bytesWritten += it.value.length;
        } catch (err) {
          if (err instanceof Timeout) this.store.timedOut?.(node, err);
          this.c.writeErrors += batch.length;
          for (const it of batch) this.report('set', it.key, err);
        }
      }),
    );
  }

  /**
   * Returns the cached value of key, or loads it with loader (once per
   * process for concurrent callers), stores it and returns it. Resolves
   * undefined when the loader (now or earlier, cached negatively) found
   * nothing.
   */
  async fetch(key: string, loader: Loader<V>, opts: FetchOptions = {}): Promise<V | undefined> {
    const m = await this.fetchMany([key], async (keys, signal) => {
      const v = await loader(keys[0], signal);
      const r = new Map<string, V>();
      if (v !== undefined) r.set(keys[0], v);
      return r;
    }, opts);
    return m.get(key);
  }

  /**
   * Returns the values of keys: cached ones from one batched read per
   * server, the misses from one loader call, written back in one batch per
   * server. Keys the loader did not return are cached as "not found" and
   * left out of the result.
   */
  async fetchMany(keys: readonly string[], loader: ManyLoader<V>, opts: FetchOptions = {}): Promise<Map<string, V>> {
    opts.signal?.throwIfAborted();
    const uniq = [...new Set(keys)];
    const out = new Map<string, V>();
    const raw = await abortable(this.readRaw(uniq), opts.signal);
    const misses: string[] = [];
    const noWrite = new Set<string>();
    uniq.forEach((k, i) => {
      const r = this.classify(k, raw[i]);
      if (r.kind === 'hit') out.set(k, r.value);
      else if (r.kind === 'miss') {
        misses.push(k);
        if (!r.write) noWrite.add(k);
      }
    });
    if (misses.length === 0) return out;

    // Join loads already running here for some keys; load the rest in one call.
    const waits: Promise<Map<string, Loaded<V>>>[] = [];
    const own: string[] = [];
    for (const k of misses) {
      const f = this.flights.get(k);
      if (f) {
        this.c.shared++;
        waits.push(f.result);
      } else own.push(k);
    }
    if (own.length > 0) waits.push(this.load(own, loader, opts.ttl, noWrite));
    const results = await abortable(Promise.all(waits), opts.signal);
    for (const m of results) {
      for (const k of misses) {
        const r = m.get(k);
        if (r?.found) out.set(k, r.value as V);
      }
    }
    return out;
  }

  private load(keys: string[], loader: ManyLoader<V>, ttl: number | undefined, noWrite: Set<string>): Promise<Map<string, Loaded<V>>> {
    const flight: Flight<V> = { keys: new Set(keys), voided: new Set(), result: undefined as never };
    flight.result = (async () => {
      this.c.loads++;
      const start = performance.now();
      const signal = AbortSignal.timeout(this.o.loadTimeout);
      let got: Map<string, V> | Record<string, V>;
      try {
        got = await loader([...keys], signal);
      } catch (err) {
        this.c.loadErrors++;
        throw err;
      }
      const cost = Math.round((performance.now() - start) * 1000);
      const map = got instanceof Map ? got : new Map(Object.entries(got ?? {}));
      const res = new Map<string, Loaded<V>>();
      const items: SetItem[] = [];
      const written = Date.now();
      const baseTtl = ttl ?? this.o.ttl;
      for (const k of keys) {
        const found = map.has(k) && map.get(k) !== undefined;
        res.set(k, found ? { found, value: map.get(k) } : { found });
        if (noWrite.has(k) || flight.voided.has(k)) continue;
        if (found) {
          const t = this.jitter(baseTtl);
          const b = this.encodeValue(k, map.get(k) as V, { written, ttl: t > 0 ? t : undefined, cost });
          if (b) items.push({ key: k, value: b, ttl: t });
        } else {
          items.push({ key: k, value: this.codec.encodeNegative(), ttl: this.jitter(this.o.negativeTtl) });
        }
      }
      await this.writeBack(items.filter((it) => !flight.voided.has(it.key)));
      return res;
    })().finally(() => {
      for (const k of keys) if (this.flights.get(k) === flight) this.flights.delete(k);
    });
    for (const k of keys) this.flights.set(k, flight);
    return flight.result;
  }

  /** Reads one key: the value, or undefined (absent, negative or unreadable). Store errors are thrown. */
  async get(key: string): Promise<V | undefined> {
    const node = this.store.nodeOf(key);
    const [b] = await withTimeout(this.store.getBatch(node, [key]), this.o.storeTimeout);
    const r = this.classify(key, b);
    return r.kind === 'hit' ? r.value : undefined;
  }

  /** Writes a value (ttl in ms; default the cache's). Throws store errors and ValueTooLarge-style refusals. */
  async set(key: string, value: V, ttl?: number): Promise<void> {
    const t = this.jitter(ttl ?? this.o.ttl);
    const b = this.encodeValue(key, value, { written: Date.now(), ttl: t > 0 ? t : undefined });
    if (!b) throw new RangeError(`kura: value for ${JSON.stringify(key)} not stored: larger than maxValueSize or not encodable`);
    await withTimeout(this.store.setBatch(this.store.nodeOf(key), [{ key, value: b, ttl: t }]), this.o.storeTimeout);
    this.c.writes++;
    this.c.bytesWritten += b.length;
  }

  /**
   * Deletes keys from the cache, and voids this process's loads of them that
   * are running: their results are not written back, and callers arriving
   * after invalidate resolved start a new load. Throws when a node could not
   * be reached (the invalidation did not happen there).
   */
  async invalidate(...keys: string[]): Promise<void> {
    for (const k of keys) {
      const f = this.flights.get(k);
      if (f) {
        f.voided.add(k);
        this.flights.delete(k);
      }
    }
    const groups = groupByNode(this.store, keys);
    await Promise.all([...groups].map(([node, idx]) => withTimeout(this.store.delBatch(node, idx.map((i) => keys[i])), this.o.storeTimeout)));
  }
}
