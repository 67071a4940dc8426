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
