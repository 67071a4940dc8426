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
import type { Prober, SetItem, Store } from './store.js';

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

const addrOf = (host: string | undefined, port: number | undefined) => `${host ?? '127.0.0.1'}:${port ?? 6379}`;

function splitAddr(a: string): { host: string; port: number } {
  const i = a.lastIndexOf(':');
  return { host: a.slice(0, i), port: Number(a.slice(i + 1)) };
}

/** A Store on Redis (standalone or Cluster) over ioredis. */
export class RedisStore implements Store {
  readonly client: Redis | Cluster;
  private readonly owned: boolean;
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

  async getBatch(node: string, keys: string[]): Promise<(Buffer | null)[]> {
    const c = this.conn(node);
    if (keys.length === 1) return [await c.getBuffer(keys[0])];
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
    return {
      ping: async () => {
        const pong = await r.ping();
        if (pong !== 'PONG') throw new Error(`unexpected reply ${pong}`);
      },
      close: () => r.disconnect(),
    };
  }

  async close(): Promise<void> {
    if (this.owned) this.client.disconnect();
  }
}
