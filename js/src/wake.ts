/**
 * The lease path's push connections on Redis (Go's store/redisstore
 * wake.go, over RESP2): lease waiters' reads go through a connection with
 * CLIENT TRACKING ON, so the server reports the next change of every key a
 * waiter read (the holder's fill, an invalidation, a release, the lease's
 * expiry) and the waiter reads again at once instead of polling.
 *
 * ioredis speaks RESP2, so the reports come on a second connection, the
 * one the tracking redirects to, subscribed to __redis__:invalidate: a
 * report may therefore overtake the reply of the read that asked for it.
 * The Cache clears its "changed" mark before each read and lets a report
 * that arrives while the read is in flight set it again, so it reads once
 * more instead of waiting: no report is lost to that race.
 */

import { Redis, type RedisOptions } from 'ioredis';

/** CLIENT SETNAME of the push connections, as Go's (redisstore.WakeClientName). */
export const wakeClientName = 'kura-lease-wake';

const invalidateChannel = '__redis__:invalidate';

/** How long after a failed attempt to arm tracking the next may start (ms). */
const retryAfter = 1000;

/**
 * One node's pair of push connections: reader (tracking on, redirected)
 * and sub (subscribed to the reports). Armed only while both are up and
 * tracking was turned on after the last (re)connect of either.
 */
export class WakePair {
  private readonly reader: Redis;
  private readonly sub: Redis;
  private armed = false;
  private arming = false;
  private refused = false;
  private lastFail = 0;
  /** Counts the breaks: a read is watched only if no break happened during it. */
  private gen = 0;
  private closed = false;
  /** The subscriber's CLIENT ID while it is subscribed on its current connection. */
  private subId: number | undefined;

  constructor(
    base: RedisOptions,
    addr: { host: string; port: number },
    private readonly report: (keys: string[] | null) => void,
  ) {
    const o: RedisOptions = {
      ...base,
      ...addr,
      connectionName: wakeClientName,
      maxRetriesPerRequest: 1,
      enableOfflineQueue: false,
      // Resubscribing is arming's job: after a reconnect the subscriber's
      // new CLIENT ID must be read first, and a subscribed RESP2
      // connection accepts no other command.
      autoResubscribe: false,
      enableAutoPipelining: false,
    };
    this.reader = new Redis(o);
    this.sub = new Redis(o);
    for (const c of [this.reader, this.sub]) {
      c.on('error', () => {
        /* the pair's failures only turn watching off: waiters poll */
      });
      c.on('close', () => {
        if (c === this.sub) this.subId = undefined;
        this.broken();
      });
      c.on('ready', () => void this.arm());
    }
    // messageBuffer: 'message' would join an array of keys with commas.
    this.sub.on('messageBuffer', (channel: Buffer, msg: unknown) => {
      if (String(channel) !== invalidateChannel) return;
      if (msg === null || msg === undefined) {
        this.report(null); // FLUSHALL / FLUSHDB
        return;
      }
      this.report((Array.isArray(msg) ? msg : [msg]).map((k) => String(k)));
    });
  }

  /** A connection broke: reports may be lost, every waiter reads again. */
  private broken(): void {
    this.gen++;
    if (this.armed) {
      this.armed = false;
      this.report(null);
    }
  }

  /** Turns tracking on once both connections are up (idempotent). */
  private async arm(): Promise<void> {
    if (this.armed || this.arming || this.refused || this.closed) return;
    if (this.reader.status !== 'ready' || this.sub.status !== 'ready') return;
    if (performance.now() - this.lastFail < retryAfter) return;
    this.arming = true;
    const gen = this.gen;
    try {
      if (this.subId === undefined) {
        // A (re)connected subscriber is a new client: read its id before
        // it subscribes (then it accepts no other command).
        const id = (await this.sub.client('ID')) as number;
        await this.sub.subscribe(invalidateChannel);
        this.subId = id;
      }
      await this.reader.client('TRACKING', 'ON', 'REDIRECT', String(this.subId));
      if (gen === this.gen && !this.closed) this.armed = true;
    } catch (err) {
      this.lastFail = performance.now();
      // A server before Redis 6, or an ACL user without CLIENT TRACKING,
      // never will: poll.
      if (err instanceof Error && /unknown (sub)?command|NOPERM|syntax/i.test(err.message)) this.refused = true;
    } finally {
      this.arming = false;
    }
  }

  /**
   * Reads keys through the tracking connection. watched is false when the
   * pair is not armed (the read then goes nowhere: the caller reads
   * plainly), or broke while the read was in flight.
   */
  async read(keys: string[], cluster: boolean): Promise<{ values: (Buffer | null)[]; watched: boolean } | undefined> {
    if (!this.armed) {
      void this.arm();
      return undefined;
    }
    const gen = this.gen;
    let values: (Buffer | null)[];
    if (keys.length === 1) values = [await this.reader.getBuffer(keys[0])];
    else if (!cluster) values = await this.reader.mgetBuffer(keys);
    else {
      // Keys of different slots cannot share an MGET on a Cluster node.
      const p = this.reader.pipeline();
      for (const k of keys) p.getBuffer(k);
      values = ((await p.exec()) ?? []).map(([err, v]) => {
        if (err) throw err;
        return (v as Buffer | null) ?? null;
      });
    }
    return { values, watched: this.armed && gen === this.gen };
  }

  close(): void {
    this.closed = true;
    this.armed = false;
    this.reader.disconnect();
    this.sub.disconnect();
  }
}
