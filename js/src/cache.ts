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

import { randomBytes } from 'node:crypto';
import { Codec, SerializerId, dictDigest, dictionaryID, encodeEntry, parseHeader, type Fields, type Header } from './codec.js';
import { FormatError } from './errors.js';
import { fingerprint, MAX_SCHEMA_LEN, named, parseSchema, type SchemaNode } from './schema.js';
import { groupByNode, isLeaser, isLeaseWaker, type FillItem, type Leaser, type LeaseWaker, type SetItem, type Store } from './store.js';

/** Defaults of CacheOptions (the Go package's). */
export const cacheDefaults = {
  negativeTtl: 60_000,
  maxValueSize: 4 << 20,
  warnValueSize: 100 << 10,
  storeTimeout: 250,
  loadTimeout: 30_000,
  schemaGrace: 60_000,
  dictionaryRecheck: 60_000,
  leaseTtl: 10_000,
  leaseWait: 2_000,
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
  /**
   * How long a dictionary read from the store is used for values that carry
   * no digest (written before digests existed) before the store is asked
   * again (ms), as Go's codec.Options.DictionaryRecheck: a forged copy
   * published under the same 28-bit id stops being used once the real one
   * is back. Default 60 000.
   */
  dictionaryRecheck?: number;
  /**
   * Gives structs that a Go writer stored as arrays (the compact envelope,
   * serializer msgpack-array) their field names, from the schema the writer
   * published under its fingerprint (Go's dictstore.Registry.PublishSchema,
   * key "kura:schema:" + 8 hex digits). Such an entry whose schema is not
   * published, or does not fit, is not understood: a miss this cache does
   * not overwrite. Default false: such values come back as arrays.
   */
  namedFields?: boolean;
  /**
   * Leases (docs/leases.md), compatible with Go's: 'auto' (default) uses
   * them when the store has them (Redis, Redis Cluster); 'off' is plain
   * cache-aside with one load per key per process.
   */
  leases?: 'auto' | 'off';
  /** How long a lease outlives a holder that died (ms). Default 10 000. */
  leaseTtl?: number;
  /** How long a caller waits for another caller's load before loading for itself, without writing back (ms). Default 2 000. */
  leaseWait?: number;
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
  /** "leases" (one load per key across processes) or "process" (per process). */
  coordination: 'leases' | 'process';
  /** Keys a caller waited for while another caller (any process, any language) held the lease. */
  leaseWaits: number;
  /** Keys loaded without writing back because the lease holder took longer than leaseWait (or the lease read failed). */
  leaseFailOpen: number;
  /** Fills refused because the lease was invalidated, expired or taken over meanwhile. */
  leaseFillsLost: number;
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
  | { kind: 'miss'; write: boolean; held?: boolean; prev?: Buffer }
  | { kind: 'dict'; id: number; digest?: Uint8Array; recheck?: boolean }
  | { kind: 'schema'; fp: number };

/** The keys of one node waiting for this tick's read, and their callers. */
interface ReadBatch {
  keys: string[];
  waiters: { resolve: (b: Buffer | null) => void; reject: (err: unknown) => void }[];
}

class Timeout extends Error {
  override name = 'TimeoutError';
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  // One promise and one timer per call (this is on the hit path).
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new Timeout(`kura: store call took longer than ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e) => {
        clearTimeout(t);
        reject(e);
      },
    );
  });
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
  private readonly o: Required<Pick<CacheOptions<V>, 'ttl' | 'negativeTtl' | 'ttlJitter' | 'maxValueSize' | 'warnValueSize' | 'storeTimeout' | 'loadTimeout' | 'schemaGrace' | 'dictionaryRecheck' | 'leaseTtl' | 'leaseWait'>>;
  private readonly leaser?: Leaser;
  private readonly dictReader?: { readDictionary(id: number, maxSize: number): Promise<Buffer[]> };
  private readonly deadDicts = new Set<number>();
  /** When the store last vouched for each dictionary read from it (ms). */
  private readonly dictVouched = new Map<number, number>();
  private dictLookups = 0;
  private readonly schemaReader?: { readSchema(fingerprint: number, maxSize: number): Promise<Buffer[]> };
  private readonly schemas = new Map<number, SchemaNode>();
  private readonly deadSchemas = new Set<number>();
  private schemaLookups = 0;
  private readonly schemaFp?: number;
  private readonly flights = new Map<string, Flight<V>>();
  private readonly c = {
    hits: 0, misses: 0, negativeHits: 0, decodeErrors: 0, notUnderstood: 0, schemaMismatches: 0, schemaKept: 0,
    storeErrors: 0, loads: 0, loadErrors: 0, shared: 0, writes: 0, writeErrors: 0, rejected: 0, bytesRead: 0, bytesWritten: 0,
    leaseWaits: 0, leaseFailOpen: 0, leaseFillsLost: 0,
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
      dictionaryRecheck: num('dictionaryRecheck', opts.dictionaryRecheck, cacheDefaults.dictionaryRecheck),
      leaseTtl: num('leaseTtl', opts.leaseTtl, cacheDefaults.leaseTtl),
      leaseWait: num('leaseWait', opts.leaseWait, cacheDefaults.leaseWait),
    };
    const mode = opts.leases ?? 'auto';
    if (mode !== 'auto' && mode !== 'off') throw new Error(`kura: options.leases: ${String(mode)}; want 'auto' or 'off'`);
    const wrapperHas = (store as { hasLeases?: boolean }).hasLeases;
    if (mode === 'auto' && isLeaser(store) && wrapperHas !== false) this.leaser = store;
    if (typeof (store as { readDictionary?: unknown }).readDictionary === 'function') this.dictReader = store as never;
    if (opts.namedFields && typeof (store as { readSchema?: unknown }).readSchema === 'function') this.schemaReader = store as never;
    if (opts.schema !== undefined) this.schemaFp = fingerprint(opts.schema);
  }

  /** A snapshot of the counters. */
  stats(): CacheStats {
    return { name: this.name, coordination: this.leaser ? 'leases' : 'process', ...this.c };
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

  /**
   * Reads one key as part of this tick's batch: the fetches that arrive
   * before the next process.nextTick share one read per node (MGET on a
   * standalone Redis), sent after every one of them was called, so each
   * read still starts after its caller arrived. One timer bounds the batch.
   * Resolves the stored bytes or null; rejects with the node's error.
   */
  private readOne(key: string): Promise<Buffer | null> {
    const node = this.store.nodeOf(key);
    let batch = this.pending.get(node);
    if (!batch) {
      batch = { keys: [], waiters: [] };
      this.pending.set(node, batch);
      if (this.pending.size === 1) process.nextTick(this.flushReads);
    }
    const b = batch;
    b.keys.push(key);
    return new Promise<Buffer | null>((resolve, reject) => void b.waiters.push({ resolve, reject }));
  }

  private readonly pending = new Map<string, ReadBatch>();

  private readonly flushReads = (): void => {
    const batches = [...this.pending];
    this.pending.clear();
    for (const [node, b] of batches) {
      withTimeout(this.store.getBatch(node, b.keys), this.o.storeTimeout).then(
        (vals) => {
          for (let i = 0; i < b.waiters.length; i++) b.waiters[i].resolve(vals[i] ?? null);
        },
        (err) => {
          if (err instanceof Timeout) this.store.timedOut?.(node, err);
          for (const w of b.waiters) w.reject(err);
        },
      );
    }
  };

  /** Reads keys in one round trip per node; store errors become misses. */
  private async readRaw(keys: string[]): Promise<(Buffer | null | Error)[]> {
    const got = await this.readNodes(keys, async (node, ks) => ({ values: await this.store.getBatch(node, ks), watched: false }));
    return got.raw;
  }

  /**
   * readRaw through the store's lease reports: watched is true when every
   * node's read was (the server reports each key's next change).
   */
  private readWatched(waker: LeaseWaker, keys: string[]): Promise<{ raw: (Buffer | null | Error)[]; watched: boolean }> {
    return this.readNodes(keys, (node, ks) => waker.watchedGetBatch(node, ks));
  }

  /** Reads keys with read, one call per node, each bounded by storeTimeout; store errors become misses. */
  private async readNodes(
    keys: string[],
    read: (node: string, keys: string[]) => Promise<{ values: (Buffer | null)[]; watched: boolean }>,
  ): Promise<{ raw: (Buffer | null | Error)[]; watched: boolean }> {
    const raw: (Buffer | null | Error)[] = new Array(keys.length).fill(null);
    let watched = true;
    const groups = groupByNode(this.store, keys);
    await Promise.all(
      [...groups].map(async ([node, idx]) => {
        const ks = idx.map((i) => keys[i]);
        try {
          const got = await withTimeout(read(node, ks), this.o.storeTimeout);
          if (!got.watched) watched = false;
          idx.forEach((i, j) => (raw[i] = got.values[j]));
        } catch (err) {
          watched = false;
          if (err instanceof Timeout) this.store.timedOut?.(node, err);
          for (const i of idx) raw[i] = err instanceof Error ? err : new Error(String(err));
        }
      }),
    );
    return { raw, watched };
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
    if (this.dictVouched.size > 0 && this.dictLookups === 0) {
      // A value without a digest is decoded with a dictionary from the store
      // only while the store vouched for it within dictionaryRecheck.
      const id = this.staleDictionary(b);
      if (id !== undefined) return { kind: 'dict', id, recheck: true };
    }
    let h: Header;
    let value: unknown;
    try {
      const d = this.codec.decode(b);
      h = d.header;
      if (d.kind === 'negative') {
        this.c.negativeHits++;
        return { kind: 'negative' };
      }
      if (d.kind === 'lease') {
        // Another caller (any process, any language) is loading it.
        this.c.misses++;
        return { kind: 'miss', write: true, held: true };
      }
      if (d.kind !== 'value') {
        // A tombstone: a miss a fill may replace (if it is still there).
        this.c.misses++;
        return { kind: 'miss', write: true, prev: b };
      }
      value = d.value;
      if (this.opts.namedFields && h.serializer === SerializerId['msgpack-array']) {
        const fp = h.fields.schema;
        const sch = fp === undefined ? undefined : this.schemas.get(fp);
        if (sch === undefined) {
          if (fp !== undefined && this.schemaReader && this.schemaLookups === 0 && !this.deadSchemas.has(fp)) return { kind: 'schema', fp };
          throw new FormatError('ErrNotUnderstood', `a struct stored as an array (schema ${fp === undefined ? 'none' : fp.toString(16).padStart(8, '0')}) whose schema is not published: its field names are unknown`);
        }
        try {
          value = named(sch, value);
        } catch (err) {
          throw new FormatError('ErrNotUnderstood', `a struct stored as an array does not fit its published schema: ${(err as Error).message}`, { cause: err });
        }
      }
    } catch (err) {
      if (err instanceof FormatError && err.code === 'ErrUnknownDictionary' && this.dictReader && this.dictLookups === 0) {
        // A dictionary the codec does not hold (yet): the caller looks it up in the store and classifies again.
        try {
          const h0 = parseHeader(b);
          if (h0.dict !== 0 && !this.deadDicts.has(h0.dict)) return { kind: 'dict', id: h0.dict, digest: h0.fields.dictDigest };
        } catch {
          /* fall through: counted below */
        }
      }
      this.c.misses++;
      if (err instanceof FormatError && err.notUnderstood) {
        // A newer writer's entry: never overwrite it.
        this.c.notUnderstood++;
        this.report('decode', key, err);
        return { kind: 'miss', write: false };
      }
      this.c.decodeErrors++;
      this.report('decode', key, err);
      return { kind: 'miss', write: true, prev: b };
    }
    if (!this.schemaOK(h, value)) {
      this.c.schemaMismatches++;
      this.c.misses++;
      const w = h.fields.written;
      const fresh = this.o.schemaGrace > 0 && w !== undefined && Date.now() - w < this.o.schemaGrace && w <= Date.now() + this.o.schemaGrace;
      if (fresh) this.c.schemaKept++;
      return { kind: 'miss', write: !fresh, prev: b };
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
    opts.signal?.throwIfAborted();
    // The hit path: the key joins this tick's read of its node (one MGET
    // for every fetch that arrived meanwhile), no batching structures here.
    let b: Buffer | null | Error;
    try {
      b = await abortable(this.readOne(key), opts.signal);
    } catch (err) {
      if (opts.signal?.aborted) throw err;
      b = err instanceof Error ? err : new Error(String(err));
    }
    // A hit returns here, before any batching structure is built.
    const r = this.classify(key, b);
    if (r.kind === 'hit') return r.value;
    if (r.kind === 'negative') return undefined;
    const m = await this.resolve([key], [b], async (keys, signal) => {
      const v = await loader(keys[0], signal);
      const out = new Map<string, V>();
      if (v !== undefined) out.set(keys[0], v);
      return out;
    }, opts, 0, [r]);
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
    const raw = await abortable(this.readRaw(uniq), opts.signal);
    return this.resolve(uniq, raw, loader, opts);
  }

  /** Classifies what was read and loads the misses (one loader call, joining loads running here). */
  private async resolve(uniq: string[], raw: (Buffer | null | Error)[], loader: ManyLoader<V>, opts: FetchOptions, depth = 0, classified?: Read<V>[]): Promise<Map<string, V>> {
    const out = new Map<string, V>();
    const misses: string[] = [];
    const noWrite = new Set<string>();
    const held = new Set<string>();
    const prev = new Map<string, Buffer>();
    const reads = classified ?? uniq.map((k, i) => this.classify(k, raw[i]));
    if (reads.some((r) => r.kind === 'dict')) {
      await this.loadDictionaries(reads.flatMap((r) => (r.kind === 'dict' ? [r] : [])));
      this.dictLookups++;
      try {
        uniq.forEach((k, i) => {
          if (reads[i].kind === 'dict') reads[i] = this.classify(k, raw[i]);
        });
      } finally {
        this.dictLookups--;
      }
    }
    if (reads.some((r) => r.kind === 'schema')) {
      await this.loadSchemas(reads.flatMap((r) => (r.kind === 'schema' ? [r.fp] : [])));
      this.schemaLookups++;
      try {
        uniq.forEach((k, i) => {
          if (reads[i].kind === 'schema') reads[i] = this.classify(k, raw[i]);
        });
      } finally {
        this.schemaLookups--;
      }
    }
    uniq.forEach((k, i) => {
      const r = reads[i];
      if (r.kind === 'hit') out.set(k, r.value);
      else if (r.kind === 'miss') {
        misses.push(k);
        if (!r.write) noWrite.add(k);
        if (r.held) held.add(k);
        if (r.prev) prev.set(k, r.prev);
      }
    });
    if (misses.length === 0) return out;

    // Join loads already running here for some keys; load the rest in one call.
    const waits: Promise<unknown>[] = [];
    const own: string[] = [];
    const reread: string[] = [];
    for (const k of misses) {
      const f = this.flights.get(k);
      if (f && depth < 2) {
        this.c.shared++;
        if (this.leaser) {
          // With leases a joiner never takes another caller's load as its
          // own: when that load settles it reads the key again, so what it
          // returns was read after it arrived (an invalidation from any
          // process in between makes it load for itself) -- the per-read
          // guarantee of docs/leases.md.
          waits.push(f.result.then(() => void reread.push(k)));
        } else {
          waits.push(f.result.then((m) => {
            const r = m.get(k);
            if (r?.found) out.set(k, r.value as V);
          }));
        }
      } else own.push(k);
    }
    if (own.length > 0) {
      const p = this.leaser ? this.leaseLoad(own, loader, opts.ttl, noWrite, held, prev) : this.load(own, loader, opts.ttl, noWrite);
      waits.push(p.then((m) => {
        for (const [k, r] of m) if (r.found) out.set(k, r.value as V);
      }));
    }
    await abortable(Promise.all(waits), opts.signal);
    if (reread.length > 0) {
      const raw2 = await abortable(this.readRaw(reread), opts.signal);
      const again = await this.resolve(reread, raw2, loader, opts, depth + 1);
      for (const [k, v] of again) out.set(k, v);
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

  /**
   * Looks schema descriptions up in the store (Go's dictstore schema keys),
   * keeping one only if it hashes to the fingerprint and parses. A
   * fingerprint not found is not asked for again for 10 s.
   */
  private async loadSchemas(fps: number[]): Promise<void> {
    const reader = this.schemaReader!;
    await Promise.all(
      [...new Set(fps)].map(async (fp) => {
        if (this.schemas.has(fp)) return;
        let found = false;
        try {
          const copies = await withTimeout(reader.readSchema(fp, MAX_SCHEMA_LEN), this.o.storeTimeout);
          for (const c of copies) {
            const desc = c.toString('utf8');
            if (!Buffer.from(desc, 'utf8').equals(c) || fingerprint(desc) !== fp) continue;
            try {
              if (this.schemas.size >= 1024) this.schemas.clear();
              this.schemas.set(fp, parseSchema(desc));
              found = true;
              break;
            } catch {
              /* not Go's grammar: not this fingerprint's schema */
            }
          }
        } catch (err) {
          this.report('get', `schema ${fp.toString(16).padStart(8, '0')}`, err);
        }
        if (!found) {
          this.deadSchemas.add(fp);
          setTimeout(() => this.deadSchemas.delete(fp), 10_000).unref();
        }
      }),
    );
  }

  /**
   * Looks dictionaries up in the store (Go's dictstore keys), keeping a copy
   * only if its content id is the envelope's id and, when the value names
   * one, its digest is the value's. An id not found is not asked for again
   * for 10 s.
   */
  private async loadDictionaries(wanted: { id: number; digest?: Uint8Array; recheck?: boolean }[]): Promise<void> {
    const reader = this.dictReader!;
    const asked = new Set<string>();
    await Promise.all(
      wanted.map(async ({ id, digest, recheck }) => {
        const k = `${id}:${digest ? Buffer.from(digest).toString('hex') : ''}:${recheck ? 1 : 0}`;
        if (asked.has(k)) return;
        asked.add(k);
        if (!recheck && this.codec.hasDictionary(id, digest)) return;
        let found = false;
        try {
          const copies = await withTimeout(reader.readDictionary(id, 1 << 20), this.o.storeTimeout);
          for (const d of copies) {
            if (dictionaryID(d) !== id) continue;
            if (digest && !Buffer.from(dictDigest(d)).equals(Buffer.from(digest))) continue;
            this.codec.addDictionary(id, d);
            this.dictVouched.set(id, Date.now());
            found = true;
            break;
          }
        } catch (err) {
          this.report('get', `dictionary ${id}`, err);
          if (recheck) {
            // The store did not answer: the copy held stays until the next recheck.
            this.dictVouched.set(id, Date.now());
            return;
          }
        }
        if (!found && recheck) {
          // The store no longer holds it: values without a digest are misses.
          this.codec.removeDictionary(id);
          this.dictVouched.delete(id);
        }
        if (!found) {
          this.deadDicts.add(id);
          setTimeout(() => this.deadDicts.delete(id), 10_000).unref();
        }
      }),
    );
  }

  /**
   * Returns the id of the dictionary a value without a digest names when it
   * was read from the store longer than dictionaryRecheck ago, else undefined.
   */
  private staleDictionary(b: Buffer): number | undefined {
    let h: Header;
    try {
      h = parseHeader(b);
    } catch {
      return undefined;
    }
    if (h.dict === 0 || h.fields.dictDigest) return undefined;
    const t = this.dictVouched.get(h.dict);
    if (t === undefined || Date.now() - t < this.o.dictionaryRecheck) return undefined;
    return h.dict;
  }

  /** Tries to take leases on keys: which were won, which are held by another caller, which failed. */
  private async tryLeases(keys: string[], placeholder: Buffer): Promise<{ won: string[]; held: string[]; failed: string[] }> {
    const won: string[] = [];
    const held: string[] = [];
    const failed: string[] = [];
    const groups = groupByNode(this.store, keys);
    await Promise.all(
      [...groups].map(async ([node, idx]) => {
        const ks = idx.map((i) => keys[i]);
        try {
          const got = await withTimeout(this.leaser!.tryLease(node, ks, placeholder, this.o.leaseTtl), this.o.storeTimeout);
          ks.forEach((k, j) => (got[j] ? won : held).push(k));
        } catch (err) {
          if (err instanceof Timeout) this.store.timedOut?.(node, err);
          this.c.storeErrors += ks.length;
          for (const k of ks) this.report('get', k, err);
          failed.push(...ks);
        }
      }),
    );
    return { won, held, failed };
  }

  /**
   * The lease protocol of Go's Cache on Redis: take a placeholder with SET
   * NX PX; load only the keys won (one loader call) and fill them with the
   * conditional script; wait for the keys another caller holds, and after
   * leaseWait load them without writing back (fail open). Keys whose lease
   * read failed load without writing back too.
   *
   * On a store whose server reports changes (LeaseWaker: Redis) the waits'
   * reads are watched, and the next read comes when the server reports a
   * change of a waited-for key (the holder's fill), or on a slow fallback
   * timer (20 ms doubling to 100 ms) in case a report is lost; until a
   * read is watched, and on other stores, it polls from 1 ms backing off
   * to 20 ms.
   */
  private leaseLoad(
    keys: string[],
    loader: ManyLoader<V>,
    ttl: number | undefined,
    noWrite: Set<string>,
    heldAtRead: Set<string>,
    prev: Map<string, Buffer>,
  ): Promise<Map<string, Loaded<V>>> {
    const flight: Flight<V> = { keys: new Set(keys), voided: new Set(), result: undefined as never };
    flight.result = (async () => {
      const res = new Map<string, Loaded<V>>();
      const placeholder = encodeEntry('lease', { token: randomBytes(16) });
      // A key holding bytes nobody can read (or a tombstone, or another
      // schema's value past its grace) is replaced only if those bytes are
      // still there: they are its "placeholder" (as Go's hit leases do).
      const ph = new Map<string, Buffer>(prev);
      const first = await this.tryLeases(keys.filter((k) => !noWrite.has(k) && !prev.has(k) && !heldAtRead.has(k)), placeholder);
      const won = new Set([...first.won, ...prev.keys()].filter((k) => !noWrite.has(k)));
      const open = new Set([...keys.filter((k) => noWrite.has(k)), ...first.failed]);
      let held = [...first.held, ...keys.filter((k) => heldAtRead.has(k) && !noWrite.has(k))];
      this.c.leaseWaits += held.length;
      const deadline = performance.now() + this.o.leaseWait;
      let delay = 1;
      const waker = held.length > 0 && isLeaseWaker(this.store) ? this.store : undefined;
      const w = { due: false, watched: false, fallback: 20, wake: undefined as (() => void) | undefined, keys: new Set(held) };
      const unwatch = waker?.watchLeases((ks) => {
        if (ks === null || ks.some((k) => w.keys.has(k))) {
          w.due = true;
          w.wake?.();
        }
      });
      try {
        while (held.length > 0) {
          const left = deadline - performance.now();
          if (left <= 0) {
            this.c.leaseFailOpen += held.length;
            for (const k of held) open.add(k);
            break;
          }
          if (!w.watched) {
            await new Promise((r) => setTimeout(r, Math.min(delay, left)));
            delay = Math.min(delay * 2, 20);
          } else if (!w.due) {
            // Woken by the server's report, or the fallback timer.
            await new Promise<void>((r) => {
              const t = setTimeout(r, Math.min(w.fallback / 2 + Math.random() * (w.fallback / 2), left));
              w.wake = () => {
                clearTimeout(t);
                r();
              };
            });
            w.wake = undefined;
            if (!w.due) w.fallback = Math.min(w.fallback * 2, 100);
          }
          // Cleared before the read: a report that overtakes its reply (it
          // comes on another connection) marks the keys due again.
          w.due = false;
          let raw: (Buffer | null | Error)[];
          if (waker) ({ raw, watched: w.watched } = await this.readWatched(waker, held));
          else raw = await this.readRaw(held);
          const absent: string[] = [];
          const still: string[] = [];
          held.forEach((k, i) => {
            const b = raw[i];
            if (b instanceof Error) {
              open.add(k);
              return;
            }
            if (b === null) {
              absent.push(k);
              return;
            }
            let d;
            try {
              d = this.codec.decode(b);
            } catch {
              open.add(k); // unreadable: load, do not write
              return;
            }
            if (d.kind === 'lease' || d.kind === 'tombstone') still.push(k);
            else if (d.kind === 'negative') res.set(k, { found: false });
            else if (this.schemaOK(d.header, d.value)) res.set(k, { found: true, value: d.value as V });
            else open.add(k);
          });
          held = still;
          if (absent.length > 0) {
            // The holder gave up, or an invalidation removed its lease: try again.
            const again = await this.tryLeases(absent, placeholder);
            for (const k of again.won) won.add(k);
            for (const k of again.failed) open.add(k);
            held.push(...again.held);
            // Taken by someone else since the read: not watched yet.
            if (again.held.length > 0) w.due = true;
          }
          w.keys = new Set(held);
        }
      } finally {
        unwatch?.();
      }
      const toLoad = [...won, ...open];
      if (toLoad.length === 0) return res;
      this.c.loads++;
      const start = performance.now();
      let got: Map<string, V> | Record<string, V>;
      try {
        got = await loader(toLoad, AbortSignal.timeout(this.o.loadTimeout));
      } catch (err) {
        this.c.loadErrors++;
        await this.releaseLeases([...won].filter((k) => !ph.has(k)), placeholder);
        throw err;
      }
      const cost = Math.round((performance.now() - start) * 1000);
      const map = got instanceof Map ? got : new Map(Object.entries(got ?? {}));
      const written = Date.now();
      const base = ttl ?? this.o.ttl;
      const fills: FillItem[] = [];
      const unfilled: string[] = [];
      for (const k of toLoad) {
        const found = map.has(k) && map.get(k) !== undefined;
        res.set(k, found ? { found, value: map.get(k) } : { found });
        if (!won.has(k)) continue;
        let b: Buffer | undefined;
        let t: number;
        if (found) {
          t = this.jitter(base);
          b = this.encodeValue(k, map.get(k) as V, { written, ttl: t > 0 ? t : undefined, cost });
        } else {
          t = this.jitter(this.o.negativeTtl);
          b = this.codec.encodeNegative();
        }
        if (b) fills.push({ key: k, value: b, ttl: t, placeholder: ph.get(k) ?? placeholder });
        else if (!ph.has(k)) unfilled.push(k);
      }
      await this.fillLeases(fills);
      await this.releaseLeases(unfilled, placeholder);
      return res;
    })().finally(() => {
      for (const k of keys) if (this.flights.get(k) === flight) this.flights.delete(k);
    });
    for (const k of keys) this.flights.set(k, flight);
    return flight.result;
  }

  private async fillLeases(items: FillItem[]): Promise<void> {
    if (items.length === 0) return;
    const groups = groupByNode(this.store, items.map((i) => i.key));
    await Promise.all(
      [...groups].map(async ([node, idx]) => {
        const batch = idx.map((i) => items[i]);
        try {
          const ok = await withTimeout(this.leaser!.fill(node, batch), this.o.storeTimeout);
          batch.forEach((it, j) => {
            if (ok[j]) {
              this.c.writes++;
              this.c.bytesWritten += it.value.length;
            } else this.c.leaseFillsLost++;
          });
        } catch (err) {
          if (err instanceof Timeout) this.store.timedOut?.(node, err);
          this.c.writeErrors += batch.length;
          for (const it of batch) this.report('set', it.key, err);
        }
      }),
    );
  }

  private async releaseLeases(keys: string[], placeholder: Buffer): Promise<void> {
    if (keys.length === 0) return;
    const groups = groupByNode(this.store, keys);
    await Promise.all(
      [...groups].map(async ([node, idx]) => {
        try {
          await withTimeout(this.leaser!.release(node, idx.map((i) => keys[i]), placeholder), this.o.storeTimeout);
        } catch (err) {
          for (const i of idx) this.report('delete', keys[i], err);
        }
      }),
    );
  }

  /** Reads one key: the value, or undefined (absent, negative or unreadable). Store errors are thrown. */
  async get(key: string): Promise<V | undefined> {
    const node = this.store.nodeOf(key);
    const [b] = await withTimeout(this.store.getBatch(node, [key]), this.o.storeTimeout);
    let r = this.classify(key, b);
    if (r.kind === 'dict') {
      await this.loadDictionaries([r]);
      this.dictLookups++;
      try {
        r = this.classify(key, b);
      } finally {
        this.dictLookups--;
      }
    }
    if (r.kind === 'schema') {
      await this.loadSchemas([r.fp]);
      this.schemaLookups++;
      try {
        r = this.classify(key, b);
      } finally {
        this.schemaLookups--;
      }
    }
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
