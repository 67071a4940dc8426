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
