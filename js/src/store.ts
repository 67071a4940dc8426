/**
 * The store seam: a few byte-level, node-grouped operations a backend
 * implements. The Cache groups keys by node, so a batch is one round trip
 * per server, and the health wrapper can fail one node's keys alone.
 */

/** One entry to write. ttl is milliseconds; 0 means no expiry. */
export interface SetItem {
  key: string;
  value: Uint8Array;
  ttl: number;
}

/** A node's error, with the node's address. */
export class NodeError extends Error {
  override name = 'NodeError';
  constructor(readonly node: string, readonly op: string, cause: unknown) {
    super(`kura: ${op} on ${node}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

/** A connection used only for health probes, apart from the application's connections. */
export interface Prober {
  /** Sends one probe (PING); resolves when it is answered. */
  ping(): Promise<void>;
  close(): void;
}

/** What a backend implements. Keys passed to a *Batch call all live on `node`. */
export interface Store {
  /** The node (address) that owns key. */
  nodeOf(key: string): string;
  /** The nodes that own keys now (a Cluster's masters). */
  nodes(): string[];
  /** Reads keys in one round trip; null for a key that is absent. */
  getBatch(node: string, keys: string[]): Promise<(Buffer | null)[]>;
  /** Writes items in one round trip. */
  setBatch(node: string, items: SetItem[]): Promise<void>;
  /** Deletes keys in one round trip. */
  delBatch(node: string, keys: string[]): Promise<void>;
  /** Opens a dedicated probe connection to node. */
  prober(node: string): Prober;
  /** Optional: told that a request to node passed the caller's time budget (a health wrapper counts it as the node's failure). */
  timedOut?(node: string, err: unknown): void;
  /** Closes the connections the store opened. */
  close(): Promise<void>;
}

/** One conditional write of a lease holder. */
export interface FillItem extends SetItem {
  /** The placeholder bytes the holder wrote; the fill lands only while they are still there. */
  placeholder: Uint8Array;
}

/**
 * The lease capability (the wire protocol of Go's store/redisstore): a
 * placeholder taken with SET NX PX, a fill that lands only while the
 * placeholder is still there, and a release that removes only it.
 */
export interface Leaser {
  /** Tries to take a lease on each (missing) key: true where this caller now holds it. */
  tryLease(node: string, keys: string[], placeholder: Uint8Array, ttl: number): Promise<boolean[]>;
  /** Conditional writes: true where the fill landed, false where the lease was gone (invalidated, expired, taken over). */
  fill(node: string, items: FillItem[]): Promise<boolean[]>;
  /** Removes the keys that still hold this placeholder (a failed load gives its leases up). */
  release(node: string, keys: string[], placeholder: Uint8Array): Promise<void>;
}

/**
 * The lease wake-up capability: a store whose server reports changes of
 * the keys a waiter read (Redis client tracking), so that callers waiting
 * for another caller's lease wake on the holder's fill (or an
 * invalidation, or the lease's release) instead of polling for it. The
 * Redis store has it (Go's store.LeaseWaker); a store without it is polled.
 */
export interface LeaseWaker {
  /**
   * Reads keys as getBatch does, and asks the server to report the next
   * change of each one to the functions given to watchLeases. watched is
   * false when it could not ask (the push connection is not up): the
   * caller then polls.
   */
  watchedGetBatch(node: string, keys: string[]): Promise<{ values: (Buffer | null)[]; watched: boolean }>;
  /**
   * Registers fn, called with the keys whose change the server reported
   * after a watched read, or with null when reports may have been lost (a
   * push connection broke, the server was flushed): whoever waits should
   * read again. Returns the function that unregisters fn.
   */
  watchLeases(fn: (keys: string[] | null) => void): () => void;
}

/** Reports whether a store implements the lease wake-up capability. */
export function isLeaseWaker(s: unknown): s is LeaseWaker {
  return typeof (s as LeaseWaker)?.watchedGetBatch === 'function' && typeof (s as LeaseWaker)?.watchLeases === 'function';
}

/** Reports whether a store implements the lease capability. */
export function isLeaser(s: unknown): s is Leaser {
  return typeof (s as Leaser)?.tryLease === 'function' && typeof (s as Leaser)?.fill === 'function';
}

/** Groups keys by node, keeping each key's index in the input. */
export function groupByNode(s: Store, keys: readonly string[]): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (let i = 0; i < keys.length; i++) {
    const n = s.nodeOf(keys[i]);
    let g = out.get(n);
    if (!g) out.set(n, (g = []));
    g.push(i);
  }
  return out;
}
