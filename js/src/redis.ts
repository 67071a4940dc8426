/**
 * The Redis store over ioredis: a standalone server or a Redis Cluster.
 *
 * Keys are stored as they are (no prefix, no escaping), exactly as Go's
 * redisstore stores them, so a Go and a Node cache on the same server read
 * the same keys. A batch is one round trip per node: MGET on a standalone
 * server, one pipeline of GETs per master on a Cluster (keys of different
 * slots cannot share one MGET there).
 */

import { Redis, Cluster, type RedisOptions, type ClusterNode } from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import type { FillItem, Leaser, LeaseWaker, Prober, SetItem, Store } from './store.js';
import { WakePair } from './wake.js';

/** Options of a RedisStore. */
export interface RedisStoreOptions {
  /** "host:port" of a standalone server. Exactly one of addr, cluster and client. */
  addr?: string;
  /** Seed addresses ("host:port") of a Redis Cluster. */
  cluster?: string[];
  /** An ioredis client (Redis or Cluster) the caller owns; the store does not close it. Probes then use their own connections from its options. */
  client?: Redis | Cluster;
  /** Extra ioredis options (password, TLS, ...) for the connections the store opens, the probe connections included. */
  redisOptions?: RedisOptions;
}

// The scripts of Go's store/redisstore/lease.go, byte for byte: a fill
// stores ARGV[2] (PX ARGV[3] unless 0) only while the key still holds the
// placeholder ARGV[1]; a release deletes only that placeholder.
const FILL_SCRIPT = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[3] == '0' then redis.call('SET', KEYS[1], ARGV[2]) else redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end
return 1`;
const RELEASE_SCRIPT = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])`;

const buf = (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength);

const addrOf = (host: string | undefined, port: number | undefined) => `${host ?? '127.0.0.1'}:${port ?? 6379}`;

function splitAddr(a: string): { host: string; port: number } {
  const i = a.lastIndexOf(':');
  return { host: a.slice(0, i), port: Number(a.slice(i + 1)) };
}

/** A Store on Redis (standalone or Cluster) over ioredis. */
export class RedisStore implements Store, Leaser, LeaseWaker {
  readonly client: Redis | Cluster;
  private readonly owned: boolean;
  /** The lease path's push connections, per node, opened on the first watched read. */
  private readonly wakers = new Map<string, WakePair>();
  private readonly wakeFns = new Set<(keys: string[] | null) => void>();
  private closed = false;
  private readonly standaloneAddr?: string;
  private readonly base: RedisOptions;

  constructor(opts: RedisStoreOptions) {
    const n = [opts.addr, opts.cluster, opts.client].filter((x) => x !== undefined).length;
    if (n !== 1) throw new Error('kura: RedisStore: set exactly one of addr, cluster and client');
    this.base = { ...opts.redisOptions };
    if (opts.client) {
      this.client = opts.client;
      this.owned = false;
      if (!(opts.client instanceof Cluster)) {
        const o = opts.client.options;
        this.standaloneAddr = addrOf(o.host, o.port);
        this.base = { ...o, ...opts.redisOptions };
      }
    } else if (opts.addr) {
      this.client = new Redis({ ...splitAddr(opts.addr), maxRetriesPerRequest: 1, ...opts.redisOptions });
      this.owned = true;
      this.standaloneAddr = opts.addr;
    } else {
      const seeds: ClusterNode[] = opts.cluster!.map(splitAddr);
      this.client = new Cluster(seeds, { redisOptions: { maxRetriesPerRequest: 1, ...opts.redisOptions } });
      this.owned = true;
    }
    if (this.owned) {
      // Connection errors surface as the failed commands' errors, which the
      // Cache counts and reports through onError; a library prints nothing.
      this.client.on('error', () => {});
    }
  }

  /** True on a Redis Cluster. */
  get isCluster(): boolean {
    return this.client instanceof Cluster;
  }

  nodeOf(key: string): string {
    if (this.standaloneAddr) return this.standaloneAddr;
    const owners = (this.client as Cluster).slots[calculateSlot(key)];
    return owners?.[0] ?? 'unknown';
  }

  nodes(): string[] {
    if (this.standaloneAddr) return [this.standaloneAddr];
    const seen = new Set<string>();
    for (const owners of (this.client as Cluster).slots) if (owners?.[0]) seen.add(owners[0]);
    return [...seen];
  }

  /** Waits until the client is connected (and, on a Cluster, has its slot map). */
  async ready(): Promise<void> {
    if (this.client.status === 'ready') return;
    await new Promise<void>((resolve, reject) => {
      const onReady = () => {
        this.client.off('error', onError);
        resolve();
      };
      const onError = (err: Error) => {
        if (this.client.status === 'end') {
          this.client.off('ready', onReady);
          reject(err);
        }
      };
      this.client.once('ready', onReady);
      this.client.on('error', onError);
    });
  }

  private conn(node: string): Redis {
    if (!(this.client instanceof Cluster)) return this.client;
    for (const r of this.client.nodes('master')) {
      if (addrOf(r.options.host, r.options.port) === node) return r;
    }
    throw new Error(`no connection to ${node}`);
  }

  getBatch(node: string, keys: string[]): Promise<(Buffer | null)[]> {
    const c = this.conn(node);
    if (keys.length === 1) return c.getBuffer(keys[0]).then((v) => [v]);
    return this.getMany(c, keys);
  }

  private async getMany(c: Redis, keys: string[]): Promise<(Buffer | null)[]> {
    if (!(this.client instanceof Cluster)) return c.mgetBuffer(keys);
    const p = c.pipeline();
    for (const k of keys) p.getBuffer(k);
    const res = (await p.exec()) ?? [];
    return res.map(([err, v]) => {
      if (err) throw err;
      return (v as Buffer | null) ?? null;
    });
  }

  async setBatch(node: string, items: SetItem[]): Promise<void> {
    const c = this.conn(node);
    const setOne = (t: Redis | ReturnType<Redis['pipeline']>, it: SetItem) =>
      it.ttl > 0 ? t.set(it.key, Buffer.from(it.value.buffer, it.value.byteOffset, it.value.byteLength), 'PX', Math.ceil(it.ttl)) : t.set(it.key, Buffer.from(it.value.buffer, it.value.byteOffset, it.value.byteLength));
    if (items.length === 1) {
      await setOne(c, items[0]);
      return;
    }
    const p = c.pipeline();
    for (const it of items) setOne(p, it);
    for (const [err] of (await p.exec()) ?? []) if (err) throw err;
  }

  async delBatch(node: string, keys: string[]): Promise<void> {
    const c = this.conn(node);
    if (!(this.client instanceof Cluster)) {
      await c.del(...keys);
      return;
    }
    const p = c.pipeline();
    for (const k of keys) p.del(k);
    for (const [err] of (await p.exec()) ?? []) if (err) throw err;
  }

  private scripts(c: Redis): { kuraFill: (...a: unknown[]) => Promise<number>; kuraRelease: (...a: unknown[]) => Promise<number> } {
    const r = c as unknown as { kuraFill?: unknown; defineCommand: Redis['defineCommand'] };
    if (!r.kuraFill) {
      r.defineCommand('kuraFill', { numberOfKeys: 1, lua: FILL_SCRIPT });
      r.defineCommand('kuraRelease', { numberOfKeys: 1, lua: RELEASE_SCRIPT });
    }
    return c as never;
  }

  async tryLease(node: string, keys: string[], placeholder: Uint8Array, ttl: number): Promise<boolean[]> {
    const c = this.conn(node);
    const px = Math.max(1, Math.ceil(ttl));
    const p = c.pipeline();
    for (const k of keys) p.set(k, buf(placeholder), 'PX', px, 'NX');
    const res = (await p.exec()) ?? [];
    return res.map(([err, v]) => {
      if (err) throw err;
      return v === 'OK';
    });
  }

  async fill(node: string, items: FillItem[]): Promise<boolean[]> {
    const c = this.conn(node);
    this.scripts(c);
    const p = c.pipeline() as unknown as { kuraFill: (...a: unknown[]) => void; exec(): Promise<[Error | null, unknown][] | null> };
    for (const it of items) p.kuraFill(it.key, buf(it.placeholder), buf(it.value), it.ttl > 0 ? String(Math.ceil(it.ttl)) : '0');
    const res = (await p.exec()) ?? [];
    return res.map(([err, v]) => {
      if (err) throw err;
      return Number(v) === 1;
    });
  }

  async release(node: string, keys: string[], placeholder: Uint8Array): Promise<void> {
    const c = this.conn(node);
    this.scripts(c);
    const p = c.pipeline() as unknown as { kuraRelease: (...a: unknown[]) => void; exec(): Promise<[Error | null, unknown][] | null> };
    for (const k of keys) p.kuraRelease(k, buf(placeholder));
    for (const [err] of (await p.exec()) ?? []) if (err) throw err;
  }

  /**
   * Reads keys through the lease path's push connections to node (opened
   * on the first call, with the store's redisOptions: a pair per node,
   * named "kura-lease-wake" in CLIENT LIST, shared by every Cache on the
   * store), so the server reports each key's next change to watchLeases.
   * Until they are up, or on a server that refuses client tracking
   * (Redis before 6), it is getBatch and watched is false: waiters poll.
   */
  async watchedGetBatch(node: string, keys: string[]): Promise<{ values: (Buffer | null)[]; watched: boolean }> {
    let w = this.wakers.get(node);
    if (!w && !this.closed) {
      w = new WakePair(this.base, splitAddr(node), (ks) => {
        for (const fn of this.wakeFns) fn(ks);
      });
      this.wakers.set(node, w);
    }
    // A failed watched read (a slot that moved, a push connection that
    // broke mid-read) is read again plainly, through the store's own client.
    const got = await w?.read(keys, this.isCluster).catch(() => undefined);
    return got ?? { values: await this.getBatch(node, keys), watched: false };
  }

  watchLeases(fn: (keys: string[] | null) => void): () => void {
    this.wakeFns.add(fn);
    return () => void this.wakeFns.delete(fn);
  }

  /**
   * The keys a dictionary is published under, as Go's dictstore and
   * redisstore.NodeKeys name them: "kura:dict:" + the id in 8 hex digits on
   * a standalone server; on a Cluster "{kura:dict:XXXXXXXX#n}" for each
   * master, n the smallest whose slot that master owns.
   */
  dictionaryKeys(id: number): string[] {
    const key = `kura:dict:${(id >>> 0).toString(16).padStart(8, '0')}`;
    if (!(this.client instanceof Cluster)) return [key];
    const slots = this.client.slots;
    const masters = new Set(this.nodes());
    const byMaster = new Map<string, string>();
    for (let n = 0; byMaster.size < masters.size && n < 64 * masters.size + 1024; n++) {
      const k = `{${key}#${n}}`;
      const a = slots[calculateSlot(k)]?.[0];
      if (a && !byMaster.has(a)) byMaster.set(a, k);
    }
    return [...masters].sort().flatMap((a) => (byMaster.has(a) ? [byMaster.get(a)!] : []));
  }

  /** Reads the published copies of dictionary id, each at most maxSize+1 bytes (GETRANGE). */
  async readDictionary(id: number, maxSize: number): Promise<Buffer[]> {
    const out: Buffer[] = [];
    for (const k of this.dictionaryKeys(id)) {
      const c = this.client instanceof Cluster ? this.conn(this.nodeOf(k)) : this.client;
      try {
        const v = await c.getrangeBuffer(k, 0, maxSize);
        if (v && v.length > 0 && v.length <= maxSize) out.push(v);
      } catch {
        // A server that does not answer holds no copy we can use.
      }
    }
    return out;
  }

  prober(node: string): Prober {
    // One connection per node, apart from the application's: no pool to wait
    // for, no pipeline of application commands to queue behind. No offline
    // queue and no retries: a probe to a dead node fails at once.
    const r = new Redis({
      ...this.base,
      ...splitAddr(node),
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => 50,
      lazyConnect: false,
      enableAutoPipelining: false,
    });
    r.on('error', () => {
      /* a probe connection's errors are the probe's failures */
    });
    const connected = () =>
      new Promise<void>((resolve, reject) => {
        const onReady = () => {
          r.off('error', onError);
          resolve();
        };
        const onError = (err: Error) => {
          r.off('ready', onReady);
          reject(err);
        };
        r.once('ready', onReady);
        r.once('error', onError);
      });
    return {
      ping: async () => {
        // Connecting is part of the probe (the monitor's timeout bounds it):
        // a probe connection still coming up is not a failed node.
        if (r.status !== 'ready') await connected();
        const pong = await r.ping();
        if (pong !== 'PONG') throw new Error(`unexpected reply ${pong}`);
      },
      close: () => r.disconnect(),
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const w of this.wakers.values()) w.close();
    this.wakers.clear();
    if (this.owned) this.client.disconnect();
  }
}
