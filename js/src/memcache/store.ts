/**
 * The memcached store: a pool of servers with keys placed by Go's ketama
 * ring (ring.ts), the same key forms (meta.ts), and leases on memcached's
 * own mechanism, as Go's store/memcache takes them:
 *
 *  - a lease is `mg <key> v c N<ttl>`: on a miss memcached creates an empty
 *    item and answers W (won) to exactly one caller, in any process and
 *    language, Z to the others; the item's CAS is the lease;
 *  - the fill is `ms <key> T<ttl> C<cas>`: refused (EX, NF) when an
 *    invalidation, an expiry or another lease changed the item meanwhile;
 *  - a release is `md <key> C<cas>`, an invalidation a plain `md`.
 *
 * Batches are quiet pipelines ended by mn, one per server.
 */

import type { FillItem, Leaser, Prober, SetItem, Store } from '../store.js';
import { KetamaRing, type RingServer } from './ring.js';
import { MetaConnection, MetaServerError, isPlaceholder, ttlSeconds, type MetaRequest, type MetaResponse, type Outcome } from './meta.js';

/** Options of a MemcacheStore. */
export interface MemcacheStoreOptions {
  /** The servers, "host:port" (or { addr, weight }): the address string is the server's identity on the ring, as in Go. */
  servers: (string | RingServer)[];
  /** Largest value read (bytes). Default 64 MiB. */
  maxValue?: number;
  /** Connect timeout (ms). Default 1000. */
  connectTimeout?: number;
  /** How long answers may stop coming while requests wait before the connection is dropped (ms). Default 3000. */
  readTimeout?: number;
}

const isResponse = (o: Outcome): o is MetaResponse => o !== undefined && !(o instanceof Error);

/** Throws the first error among a pipeline's outcomes. */
function check(out: Outcome[]): void {
  for (const o of out) if (o instanceof Error) throw o;
}

/** A Store (and Leaser) on a memcached pool over the meta protocol. */
export class MemcacheStore implements Store, Leaser {
  readonly ring: KetamaRing;
  private readonly conns = new Map<string, MetaConnection>();
  // The CAS of each lease this process holds, by placeholder (one per
  // leaseLoad call of the Cache) and key.
  private readonly leases = new WeakMap<Uint8Array, Map<string, bigint>>();

  constructor(private readonly opts: MemcacheStoreOptions) {
    this.ring = new KetamaRing(opts.servers);
    for (const a of this.ring.servers) this.conns.set(a, new MetaConnection(a, { maxValue: opts.maxValue, connectTimeout: opts.connectTimeout, readTimeout: opts.readTimeout }));
  }

  nodeOf(key: string): string {
    return this.ring.server(key);
  }

  nodes(): string[] {
    return [...this.ring.servers];
  }

  private conn(node: string): MetaConnection {
    const c = this.conns.get(node);
    if (!c) throw new Error(`kura: memcache: ${node} is not in the pool`);
    return c;
  }

  /** Reads keys (one quiet pipeline); lease placeholders and stale items read as absent. */
  async getBatch(node: string, keys: string[]): Promise<(Buffer | null)[]> {
    const out = await this.conn(node).exec(keys.map((key) => ({ cmd: 'mg', key, returnValue: true })), keys.length > 1);
    return out.map((o) => {
      // A key memcached cannot hold (the empty key) is a miss of its own,
      // not a failure of the other keys read with it.
      if (o instanceof RangeError) return null;
      if (o instanceof Error) throw o;
      if (o === undefined || o.status === 'EN' || isPlaceholder(o) || o.stale) return null;
      if (o.status !== 'VA') throw new Error(`kura: memcache ${node}: unexpected answer ${o.status} to mg`);
      return o.value ?? Buffer.alloc(0);
    });
  }

  async setBatch(node: string, items: SetItem[]): Promise<void> {
    const now = Date.now();
    const out = await this.conn(node).exec(items.map((it) => ({ cmd: 'ms', key: it.key, value: it.value, ttl: ttlSeconds(it.ttl, now) })), true);
    check(out);
    for (const o of out) if (isResponse(o) && o.status !== 'HD') throw new Error(`kura: memcache ${node}: ${o.status} to ms`);
  }

  async delBatch(node: string, keys: string[]): Promise<void> {
    const out = await this.conn(node).exec(keys.map((key) => ({ cmd: 'md', key })), true);
    check(out);
    for (const o of out) if (isResponse(o) && o.status !== 'HD' && o.status !== 'NF') throw new Error(`kura: memcache ${node}: ${o.status} to md`);
  }

  /**
   * Takes a lease on each key with `mg <key> v c N<ttl>`: true where this
   * caller won (W). A key that holds a value now (another caller's fill
   * landed) reads as held: the Cache's next look finds the value.
   */
  async tryLease(node: string, keys: string[], placeholder: Uint8Array, ttl: number): Promise<boolean[]> {
    const secs = Math.max(1, ttlSeconds(ttl));
    const out = await this.conn(node).exec(keys.map((key) => ({ cmd: 'mg', key, returnValue: true, returnCAS: true, vivify: secs })), keys.length > 1);
    let held = this.leases.get(placeholder);
    return out.map((o, i) => {
      if (o instanceof Error) throw o;
      if (o === undefined || o.status !== 'VA') return false;
      if (!o.won || o.cas === undefined) return false;
      if (!held) this.leases.set(placeholder, (held = new Map()));
      held.set(keys[i], o.cas);
      return true;
    });
  }

  /**
   * Fills with `ms <key> T<ttl> C<cas>`: true where it landed. A fill whose
   * placeholder is not a lease of this store (the bytes of an entry the
   * Cache replaces) first reads the key's CAS and compares the bytes, so it
   * lands only while those bytes are still there, as Redis's fill script.
   */
  async fill(node: string, items: FillItem[]): Promise<boolean[]> {
    const c = this.conn(node);
    const cas: (bigint | undefined)[] = items.map((it) => this.leases.get(it.placeholder)?.get(it.key));
    const unknown = items.flatMap((it, i) => (cas[i] === undefined ? [i] : []));
    if (unknown.length > 0) {
      const got = await c.exec(unknown.map((i) => ({ cmd: 'mg', key: items[i].key, returnValue: true, returnCAS: true })), unknown.length > 1);
      unknown.forEach((i, j) => {
        const o = got[j];
        if (o instanceof Error) throw o;
        if (o?.status === 'VA' && o.value && o.cas !== undefined && Buffer.from(items[i].placeholder).equals(o.value)) cas[i] = o.cas;
      });
    }
    const send = items.flatMap((it, i) => (cas[i] === undefined ? [] : [i]));
    const ok = new Array<boolean>(items.length).fill(false);
    if (send.length === 0) return ok;
    const now = Date.now();
    const out = await c.exec(send.map((i) => ({ cmd: 'ms', key: items[i].key, value: items[i].value, ttl: ttlSeconds(items[i].ttl, now), cas: cas[i] })), true);
    send.forEach((i, j) => {
      const o = out[j];
      if (o instanceof Error && !(o instanceof MetaServerError)) throw o;
      // Quiet: no answer is HD (stored); EX, NF, NS mean the lease was lost.
      ok[i] = o === undefined || (isResponse(o) && o.status === 'HD');
      this.leases.get(items[i].placeholder)?.delete(items[i].key);
    });
    return ok;
  }

  /** Gives leases up with `md <key> C<cas>`: an item another caller changed meanwhile is left alone. */
  async release(node: string, keys: string[], placeholder: Uint8Array): Promise<void> {
    const held = this.leases.get(placeholder);
    const reqs: MetaRequest[] = [];
    for (const key of keys) {
      const cas = held?.get(key);
      if (cas === undefined) continue;
      held!.delete(key);
      reqs.push({ cmd: 'md', key, cas });
    }
    if (reqs.length > 0) check(await this.conn(node).exec(reqs, true));
  }

  /** Adds delta to a counter, creating it at `initial` (ma N J D): the new value. For tests and tools. */
  async incr(key: string, delta = 1, ttl = 0): Promise<number> {
    const [o] = await this.conn(this.nodeOf(key)).exec([{ cmd: 'ma', key, returnValue: true, vivify: Math.max(1, ttlSeconds(ttl) || 3600), initial: delta, delta }], false);
    if (o instanceof Error) throw o;
    if (!isResponse(o) || o.status !== 'VA' || !o.value) throw new Error(`kura: memcache: unexpected answer ${o?.status} to ma`);
    return Number(o.value.toString('latin1'));
  }

  prober(node: string): Prober {
    // A connection of its own: a probe never queues behind the
    // application's pipelines.
    const c = new MetaConnection(node, { connectTimeout: this.opts.connectTimeout, readTimeout: this.opts.readTimeout });
    return {
      ping: async () => {
        const [o] = await c.exec([{ cmd: 'mn' }], false);
        if (!isResponse(o) || o.status !== 'MN') throw new Error(`kura: memcache ${node}: unexpected answer to mn`);
      },
      close: () => c.close(),
    };
  }

  async close(): Promise<void> {
    for (const c of this.conns.values()) c.close();
  }
}
