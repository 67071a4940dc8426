/**
 * The ketama ring of Go's store/memcache (its default: libketama, with each
 * server's "host:port" as its identity), so a Node and a Go service on the
 * same memcached pool send every key to the same server:
 *
 *  - a server of weight w among n servers of total weight W gets
 *    floor(float32(float32(w)/float32(W) * 160 / 4 * float32(n)) + 1e-10)
 *    MD5 digests of "addr-k", k = 0, 1, ...; each digest gives 4 points,
 *    its four little-endian 32-bit words (160 points each at equal weights);
 *  - a key hashes to the first 4 bytes of MD5(key), little-endian, and
 *    belongs to the first point at or after it, wrapping around. Equal
 *    points keep their insertion order (a stable sort, as Go's).
 *
 * Keys are hashed as their UTF-8 bytes, as Go hashes a string's bytes.
 */

import { createHash } from 'node:crypto';

/** One server on the ring. */
export interface RingServer {
  addr: string;
  /** Relative share of the keys; default 1. */
  weight?: number;
}

const f32 = Math.fround;

/** An immutable ketama ring over servers. */
export class KetamaRing {
  private readonly points: Uint32Array;
  private readonly owners: Int32Array;
  readonly servers: readonly string[];

  constructor(servers: readonly (string | RingServer)[]) {
    if (servers.length === 0) throw new Error('kura: memcache: no servers');
    const list = servers.map((s) => (typeof s === 'string' ? { addr: s, weight: 1 } : { addr: s.addr, weight: s.weight ?? 1 }));
    const seen = new Set<string>();
    let total = 0;
    list.forEach((s, i) => {
      if (!s.addr) throw new Error(`kura: memcache: servers[${i}] is empty`);
      if (seen.has(s.addr)) throw new Error(`kura: memcache: server ${s.addr} listed twice`);
      seen.add(s.addr);
      if (!Number.isInteger(s.weight) || s.weight <= 0 || s.weight > 1 << 20) {
        throw new Error(`kura: memcache: servers[${i}] has weight ${s.weight} (want 1 to ${1 << 20})`);
      }
      total += s.weight;
    });
    this.servers = list.map((s) => s.addr);
    const pts: { v: number; owner: number }[] = [];
    const n = f32(list.length);
    list.forEach((s, owner) => {
      const pct = f32(f32(s.weight) / f32(total));
      const digests = Math.floor(f32(f32(f32(pct * 160) / 4) * n) + 0.0000000001);
      for (let k = 0; k < digests; k++) {
        const d = createHash('md5').update(`${s.addr}-${k}`).digest();
        for (let h = 0; h < 4; h++) pts.push({ v: d.readUInt32LE(h * 4), owner });
      }
    });
    // Array.prototype.sort is stable: equal points keep insertion order.
    pts.sort((a, b) => a.v - b.v);
    this.points = Uint32Array.from(pts, (p) => p.v);
    this.owners = Int32Array.from(pts, (p) => p.owner);
  }

  /** The index in servers of the server owning key. */
  index(key: string): number {
    const h = createHash('md5').update(key, 'utf8').digest().readUInt32LE(0);
    const p = this.points;
    let lo = 0;
    let hi = p.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (p[mid] < h) lo = mid + 1;
      else hi = mid;
    }
    return this.owners[lo === p.length ? 0 : lo];
  }

  /** The address of the server owning key. */
  server(key: string): string {
    return this.servers[this.index(key)];
  }
}
