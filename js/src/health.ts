/**
 * Per-node health: a monitor and circuit breaker in front of a Store, with
 * the states and defaults of Go's store/health (docs/health.md).
 *
 * What the coalesced-ping field report got half right, done fully:
 * - **One probe in flight per node**, on a **dedicated connection** (never
 *   one borrowed from a pool or queued behind application commands). A
 *   probe still unanswered when the next is due counts as failed; no
 *   second one is sent behind it.
 * - Probes run in the background, never before a request: a request never
 *   waits for a ping.
 * - A **breaker**: while a node is down its keys are not sent at all; the
 *   Cache hands them straight to the loader.
 *
 * | state   | requests  | leaves it when |
 * |---------|-----------|----------------|
 * | up      | sent      | a failure → suspect (and a probe at once) |
 * | suspect | sent      | a success → up; a failed probe or failureThreshold failed requests in a row → down |
 * | down    | not sent  | a successful probe → probing |
 * | probing | sent      | recoverAfter successes in a row → up; a failure → down (back-off doubled) |
 */

import { isLeaser, isLeaseWaker, type FillItem, type Leaser, type LeaseWaker, type Prober, type SetItem, type Store } from './store.js';

/** A node's state. */
export type NodeState = 'up' | 'suspect' | 'down' | 'probing';

/** Options of a HealthStore. Each field's default is used when it is undefined or 0. */
export interface HealthOptions {
  /** How often an up node is probed (ms). Default 100. */
  probeInterval?: number;
  /** How long a probe may take before it fails (ms). Default 200. */
  probeTimeout?: number;
  /** Failed requests in a row that take a suspect node down. Default 5. */
  failureThreshold?: number;
  /** Successes in a row that bring a probing node up. Default 2. */
  recoverAfter?: number;
  /** Back-off between probes of a down node (ms): from backoffMin doubling to backoffMax. Defaults 50 and 1000. */
  backoffMin?: number;
  backoffMax?: number;
  /** How often the node list is read again (ms; a Cluster's masters). Default 1000. */
  nodeRefresh?: number;
  /** Called on every state change. */
  onStateChange?: (t: Transition) => void;
}

/** Defaults of HealthOptions, the same as Go's store/health. */
export const healthDefaults = {
  probeInterval: 100,
  probeTimeout: 200,
  failureThreshold: 5,
  recoverAfter: 2,
  backoffMin: 50,
  backoffMax: 1000,
  nodeRefresh: 1000,
} as const;

/** A state change. */
export interface Transition {
  node: string;
  from: NodeState;
  to: NodeState;
  at: number;
  probe: boolean;
  cause?: unknown;
}

/** Per-node counters. */
export interface NodeStats {
  node: string;
  state: NodeState;
  since: number;
  probes: number;
  probeFailures: number;
  /** Probes actually sent (a round whose previous probe is unanswered sends none). */
  probesSent: number;
  /** Last probe's latency (ms). */
  lastProbe: number;
  requestFailures: number;
  /** Keys failed fast (not sent) while the node was down. */
  failFast: number;
  transitions: Record<NodeState, number>;
}

/** The error a down node's requests fail with, at once, without being sent. */
export class NodeDownError extends Error {
  override name = 'NodeDownError';
  constructor(readonly node: string) {
    super(`kura: node ${node} down, request not sent (circuit open)`);
  }
}

class Node {
  state: NodeState = 'up';
  since = Date.now();
  fails = 0;
  okRun = 0;
  backoff: number;
  probes = 0;
  probesSent = 0;
  probeFailures = 0;
  lastProbe = 0;
  requestFailures = 0;
  failFast = 0;
  transitions: Record<NodeState, number> = { up: 0, suspect: 0, down: 0, probing: 0 };
  private pending: Promise<void> | undefined; // the probe in flight, if any
  private wake: (() => void) | undefined;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly prober: Prober;

  constructor(readonly addr: string, private readonly h: HealthStore) {
    this.backoff = h.opts.backoffMin;
    this.prober = h.inner.prober(addr);
    void this.loop();
  }

  private set(to: NodeState, probe: boolean, cause?: unknown): void {
    const from = this.state;
    if (from === to) return;
    if (to === 'up') {
      this.fails = 0;
      this.backoff = this.h.opts.backoffMin;
    } else if (to === 'down') {
      this.okRun = 0;
    } else if (to === 'probing') {
      this.fails = 0;
    }
    this.state = to;
    this.since = Date.now();
    this.transitions[to]++;
    this.h.opts.onStateChange?.({ node: this.addr, from, to, at: this.since, probe, cause });
  }

  success(probe: boolean): void {
    switch (this.state) {
      case 'up':
        this.fails = 0;
        break;
      case 'suspect':
        this.set('up', probe);
        break;
      case 'probing':
        if (++this.okRun >= this.h.opts.recoverAfter) this.set('up', probe);
        break;
      case 'down':
        if (probe) {
          this.okRun = 1;
          this.set(this.okRun >= this.h.opts.recoverAfter ? 'up' : 'probing', probe);
        }
        break;
    }
  }

  failure(cause: unknown, probe: boolean): void {
    if (probe) this.probeFailures++;
    else this.requestFailures++;
    this.fails++;
    switch (this.state) {
      case 'up':
        this.set('suspect', probe, cause);
        if (!probe) this.kick();
        break;
      case 'suspect':
        if (probe || this.fails >= this.h.opts.failureThreshold) this.set('down', probe, cause);
        break;
      case 'probing':
        this.backoff = Math.min(this.backoff * 2, this.h.opts.backoffMax);
        this.set('down', probe, cause);
        break;
      case 'down':
        if (probe) this.backoff = Math.min(this.backoff * 2, this.h.opts.backoffMax);
        break;
    }
  }

  private wait(): number {
    if (this.state === 'suspect') return 0;
    if (this.state === 'down') return this.backoff;
    return this.h.opts.probeInterval;
  }

  private kick(): void {
    this.wake?.();
  }

  private async loop(): Promise<void> {
    while (!this.closed) {
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        this.timer = setTimeout(resolve, this.wait());
        this.timer.unref();
      });
      clearTimeout(this.timer);
      this.wake = undefined;
      if (this.closed) break;
      await this.probe();
    }
  }

  private async probe(): Promise<void> {
    this.probes++;
    if (this.pending) {
      // The last probe is still unanswered: it has failed already; do not
      // queue another behind it on the same connection.
      this.failure(new Error('previous probe still unanswered'), true);
      return;
    }
    const start = performance.now();
    this.probesSent++;
    const p = this.prober.ping();
    this.pending = p.then(
      () => {
        this.pending = undefined;
      },
      () => {
        this.pending = undefined;
      },
    );
    let t: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        p,
        new Promise<never>((_, reject) => {
          t = setTimeout(() => reject(new Error(`probe took longer than ${this.h.opts.probeTimeout} ms`)), this.h.opts.probeTimeout);
        }),
      ]);
      this.lastProbe = performance.now() - start;
      if (!this.closed) this.success(true);
    } catch (err) {
      this.lastProbe = performance.now() - start;
      if (!this.closed) this.failure(err, true);
    } finally {
      clearTimeout(t);
    }
  }

  close(): void {
    this.closed = true;
    this.kick();
    this.prober.close();
  }

  stats(): NodeStats {
    return {
      node: this.addr,
      state: this.state,
      since: this.since,
      probes: this.probes,
      probesSent: this.probesSent,
      probeFailures: this.probeFailures,
      lastProbe: this.lastProbe,
      requestFailures: this.requestFailures,
      failFast: this.failFast,
      transitions: { ...this.transitions },
    };
  }
}

/** Is an error a node's failure? Refused writes and missing keys are not; everything else (timeouts included) is. */
function isFailure(err: unknown): boolean {
  return !(err instanceof NodeDownError);
}

/**
 * A Store wrapped with a per-node monitor and breaker. Close it to stop
 * the probes (the inner store is the caller's to close).
 */
export class HealthStore implements Store, Leaser, LeaseWaker {
  readonly opts: Required<Omit<HealthOptions, 'onStateChange'>> & Pick<HealthOptions, 'onStateChange'>;
  private readonly nodesByAddr = new Map<string, Node>();
  private readonly refresh: NodeJS.Timeout;

  constructor(readonly inner: Store, opts: HealthOptions = {}) {
    const o = { ...healthDefaults } as { -readonly [K in keyof typeof healthDefaults]: number };
    for (const k of Object.keys(healthDefaults) as (keyof typeof healthDefaults)[]) {
      const v = opts[k];
      if (v !== undefined && v !== 0) {
        if (!(v > 0) || !Number.isFinite(v)) throw new Error(`kura: health: ${k}: ${v}; want a positive number (0 for the default)`);
        o[k] = v;
      }
    }
    this.opts = { ...o, onStateChange: opts.onStateChange };
    this.syncNodes();
    this.refresh = setInterval(() => this.syncNodes(), this.opts.nodeRefresh);
    this.refresh.unref();
  }

  private syncNodes(): void {
    for (const n of this.inner.nodes()) if (!this.nodesByAddr.has(n)) this.nodesByAddr.set(n, new Node(n, this));
  }

  private node(addr: string): Node {
    let n = this.nodesByAddr.get(addr);
    if (!n) this.nodesByAddr.set(addr, (n = new Node(addr, this)));
    return n;
  }

  /** The state of a node. */
  state(addr: string): NodeState {
    return this.node(addr).state;
  }

  /** Per-node counters. */
  stats(): NodeStats[] {
    return [...this.nodesByAddr.values()].map((n) => n.stats());
  }

  nodeOf(key: string): string {
    return this.inner.nodeOf(key);
  }

  nodes(): string[] {
    return this.inner.nodes();
  }

  private async guard<T>(addr: string, keys: number, op: () => Promise<T>): Promise<T> {
    const n = this.node(addr);
    if (n.state === 'down') {
      n.failFast += keys;
      throw new NodeDownError(addr);
    }
    try {
      const r = await op();
      n.success(false);
      return r;
    } catch (err) {
      if (isFailure(err)) n.failure(err, false);
      throw err;
    }
  }

  /** Reports a request that timed out on addr (the Cache's storeTimeout): a failure of that node. */
  timedOut(addr: string, err: unknown): void {
    const n = this.node(addr);
    if (n.state !== 'down') n.failure(err, false);
  }

  getBatch(node: string, keys: string[]): Promise<(Buffer | null)[]> {
    return this.guard(node, keys.length, () => this.inner.getBatch(node, keys));
  }

  setBatch(node: string, items: SetItem[]): Promise<void> {
    return this.guard(node, items.length, () => this.inner.setBatch(node, items));
  }

  delBatch(node: string, keys: string[]): Promise<void> {
    return this.guard(node, keys.length, () => this.inner.delBatch(node, keys));
  }

  prober(node: string): Prober {
    return this.inner.prober(node);
  }

  // Leases go through the breaker like every other request: a down node's
  // lease reads fail at once, and the Cache loads without writing back.
  tryLease(node: string, keys: string[], placeholder: Uint8Array, ttl: number): Promise<boolean[]> {
    const l = this.leaser();
    return this.guard(node, keys.length, () => l.tryLease(node, keys, placeholder, ttl));
  }

  fill(node: string, items: FillItem[]): Promise<boolean[]> {
    const l = this.leaser();
    return this.guard(node, items.length, () => l.fill(node, items));
  }

  release(node: string, keys: string[], placeholder: Uint8Array): Promise<void> {
    const l = this.leaser();
    return this.guard(node, keys.length, () => l.release(node, keys, placeholder));
  }

  /**
   * A watched read (the lease path's server reports) through the breaker:
   * a down node's fail at once, as its plain reads do. Over a store without
   * reports it is getBatch, unwatched.
   */
  watchedGetBatch(node: string, keys: string[]): Promise<{ values: (Buffer | null)[]; watched: boolean }> {
    const w = this.inner;
    if (!isLeaseWaker(w)) return this.getBatch(node, keys).then((values) => ({ values, watched: false }));
    return this.guard(node, keys.length, () => w.watchedGetBatch(node, keys));
  }

  /** Registers fn with the wrapped store's lease reports. */
  watchLeases(fn: (keys: string[] | null) => void): () => void {
    return isLeaseWaker(this.inner) ? this.inner.watchLeases(fn) : () => {};
  }

  /** Reads published dictionaries through the wrapped store (Cache uses it when present). */
  readDictionary(id: number, maxSize: number): Promise<Buffer[]> {
    const r = (this.inner as { readDictionary?: (id: number, max: number) => Promise<Buffer[]> }).readDictionary;
    return r ? r.call(this.inner, id, maxSize) : Promise.resolve([]);
  }

  /** Reports whether the wrapped store has leases (so the wrapper offers them only then). */
  get hasLeases(): boolean {
    return isLeaser(this.inner);
  }

  private leaser(): Leaser {
    if (!isLeaser(this.inner)) throw new Error('kura: the wrapped store has no leases');
    return this.inner;
  }

  /** Stops the monitor. The inner store stays open. */
  async close(): Promise<void> {
    clearInterval(this.refresh);
    for (const n of this.nodesByAddr.values()) n.close();
    this.nodesByAddr.clear();
  }
}
