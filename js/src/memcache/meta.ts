/**
 * A small memcached meta-protocol client (mg, ms, md, ma, mn), written for
 * kura because no maintained npm package speaks the meta protocol: the
 * same key forms, flags and pipelines as Go's store/memcache/meta.
 *
 * - Keys: a key of 1 to 250 bytes with no space, control byte or DEL is
 *   sent as is; another key of at most 186 bytes (not starting with NUL)
 *   is sent base64-encoded with the b flag (memcached stores the original
 *   bytes); any longer key becomes the binary key 0x00 + its first 100
 *   bytes + SHA-256(key), base64 with b. Go and Node therefore address the
 *   same item for every key.
 * - One connection per server, commands pipelined on it in order. A batch
 *   is a run of quiet commands ended by mn: only interesting answers (hits,
 *   NS/NF/EX, errors) come back, each carrying its request's O token; an
 *   error line carries none, so every request of the batch it could belong
 *   to is failed with it (a false failure costs a miss, a misplaced answer
 *   a wrong value).
 * - The response parser trusts no byte: line length, value length (at most
 *   maxValue) and the CRLF after a data block are checked; anything else is
 *   a MetaProtocolError and the connection is dropped.
 */

import { createHash } from 'node:crypto';
import net from 'node:net';

/** Key limits of the text protocol (Go: meta.MaxKeyLen and friends). */
export const MAX_KEY_LEN = 250;
const MAX_BASE64_RAW = 186;
const HASHED_PREFIX_LEN = 100;
/** Longest response line accepted (Go: maxLine). */
export const MAX_LINE = 8 << 10;

/** A malformed answer from a server: the connection it came on is dropped. */
export class MetaProtocolError extends Error {
  override name = 'MetaProtocolError';
}

/** An error line (ERROR, CLIENT_ERROR, SERVER_ERROR) for a request. */
export class MetaServerError extends Error {
  override name = 'MetaServerError';
  constructor(readonly status: string, readonly text: string) {
    super(`memcached answered ${status}${text ? ' ' + text : ''}`);
  }
}

/** The wire token of key and whether it needs the b flag. Throws for the empty key. */
export function wireKey(key: string): { token: string; b64: boolean } {
  const raw = Buffer.from(key, 'utf8');
  if (raw.length === 0) throw new RangeError('kura: memcache: empty key (memcached keys are 1 to 250 bytes)');
  let plain = raw.length <= MAX_KEY_LEN;
  if (plain) {
    for (let i = 0; i < raw.length; i++) {
      const c = raw[i];
      if (c <= 0x20 || c === 0x7f) {
        plain = false;
        break;
      }
    }
  }
  if (plain) return { token: key, b64: false };
  if (raw.length <= MAX_BASE64_RAW && raw[0] !== 0) return { token: raw.toString('base64'), b64: true };
  const sum = createHash('sha256').update(raw).digest();
  const hashed = Buffer.concat([Buffer.from([0]), raw.subarray(0, HASHED_PREFIX_LEN), sum]);
  return { token: hashed.toString('base64'), b64: true };
}

/** One meta command; a field left out sends no flag. */
export interface MetaRequest {
  cmd: 'mg' | 'ms' | 'md' | 'ma' | 'mn';
  key?: string;
  value?: Uint8Array;
  /** v: return the value (mg, ma). */
  returnValue?: boolean;
  /** c: return the CAS. */
  returnCAS?: boolean;
  /** s: return the item size. */
  returnSize?: boolean;
  /** t: return the TTL left (seconds, -1 for none). */
  returnTTL?: boolean;
  /** T: TTL in wire seconds (see ttlSeconds); sent when set. */
  ttl?: number;
  /** C: compare CAS. */
  cas?: bigint;
  /** N: vivify on miss with this TTL (mg: a lease; ma: create the counter). */
  vivify?: number;
  /** R: hand out W when the TTL left is below this (mg). */
  recache?: number;
  /** I: invalidate (md: mark stale). */
  invalidate?: boolean;
  /** J: initial value (ma with N). */
  initial?: number;
  /** D: delta (ma). */
  delta?: number;
  /** M mode (ms: S E A P R; ma: I D). */
  mode?: string;
  /** q: quiet (only interesting answers). */
  quiet?: boolean;
}

/** One answer. */
export interface MetaResponse {
  status: 'HD' | 'VA' | 'EN' | 'NF' | 'NS' | 'EX' | 'MN';
  value?: Buffer;
  opaque: number;
  cas?: bigint;
  size?: number;
  ttl?: number;
  /** W: this caller won the (re)cache lease. */
  won: boolean;
  /** Z: another caller won it. */
  alreadyWon: boolean;
  /** X: the item is stale. */
  stale: boolean;
}

/** An empty item created by a lease (mg N) that no fill has replaced yet. */
export function isPlaceholder(r: MetaResponse): boolean {
  return r.status === 'VA' && (r.value?.length ?? 0) === 0 && (r.won || r.alreadyWon || r.stale);
}

const MAX_TTL_DELTA = 30 * 24 * 60 * 60;

/** A TTL (ms) as memcached's T flag: whole seconds rounded up; beyond 30 days an absolute Unix time (Go: meta.TTL). */
export function ttlSeconds(ms: number, now = Date.now()): number {
  if (!(ms > 0)) return 0;
  const secs = Math.ceil(ms / 1000);
  if (secs <= MAX_TTL_DELTA) return secs;
  const abs = Math.floor(now / 1000) + secs;
  // memcached parses exptime as a signed 32-bit number: past 2038 it answers HD
  // and drops the item at once, so a TTL ending beyond that means "no expiry".
  return abs > 0x7fffffff ? 0 : abs;
}

/** The wire form of a request with opaque token o (0: none). */
export function encodeRequest(r: MetaRequest, o = 0): Buffer {
  if (r.cmd === 'mn') return Buffer.from('mn\r\n');
  const { token, b64 } = wireKey(r.key ?? '');
  let line = `${r.cmd} ${token}`;
  if (r.cmd === 'ms') line += ` ${r.value?.length ?? 0}`;
  if (b64) line += ' b';
  if (r.returnValue) line += ' v';
  if (r.returnCAS) line += ' c';
  if (r.returnTTL) line += ' t';
  if (r.returnSize) line += ' s';
  if (r.invalidate) line += ' I';
  if (r.ttl !== undefined) line += ` T${Math.floor(r.ttl)}`;
  if (r.cas !== undefined && r.cas !== 0n) line += ` C${r.cas}`;
  if (r.vivify !== undefined && r.vivify > 0) line += ` N${Math.floor(r.vivify)}`;
  if (r.recache !== undefined && r.recache > 0) line += ` R${Math.floor(r.recache)}`;
  if (r.mode) line += ` M${r.mode}`;
  if (r.delta) line += ` D${Math.floor(r.delta)}`;
  if (r.initial) line += ` J${Math.floor(r.initial)}`;
  if (r.quiet) line += ' q';
  if (o) line += ` O${o}`;
  line += '\r\n';
  if (r.cmd !== 'ms') return Buffer.from(line, 'latin1');
  const v = r.value ?? new Uint8Array(0);
  const out = Buffer.allocUnsafe(line.length + v.length + 2);
  out.write(line, 0, 'latin1');
  out.set(v, line.length);
  out[out.length - 2] = 0x0d;
  out[out.length - 1] = 0x0a;
  return out;
}

const STATUSES = new Set(['HD', 'VA', 'EN', 'NF', 'NS', 'EX', 'MN']);
const ERRORS = new Set(['ERROR', 'CLIENT_ERROR', 'SERVER_ERROR']);
const DIGITS = /^[0-9]{1,20}$/;

/**
 * A streaming parser of meta answers: feed it bytes as they arrive, take
 * the complete answers (MetaResponse, or MetaServerError for an error
 * line). Throws MetaProtocolError for bytes that are not the protocol; it
 * then holds no more state worth keeping (drop the connection).
 */
export class ResponseParser {
  private buf: Buffer = Buffer.alloc(0);
  private pendingValue?: { head: MetaResponse; len: number };

  constructor(readonly maxValue = 64 << 20) {}

  /** Adds bytes; returns the answers they complete, in order. */
  push(chunk: Buffer): (MetaResponse | MetaServerError)[] {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    const out: (MetaResponse | MetaServerError)[] = [];
    let off = 0;
    for (;;) {
      if (this.pendingValue) {
        const { head, len } = this.pendingValue;
        if (this.buf.length - off < len + 2) break;
        if (this.buf[off + len] !== 0x0d || this.buf[off + len + 1] !== 0x0a) {
          throw new MetaProtocolError(`data block of ${len} bytes not ended by CRLF`);
        }
        head.value = Buffer.from(this.buf.subarray(off, off + len)); // a copy: the read buffer is reused
        off += len + 2;
        this.pendingValue = undefined;
        out.push(head);
        continue;
      }
      const nl = this.buf.indexOf(0x0a, off);
      if (nl < 0) {
        if (this.buf.length - off > MAX_LINE) throw new MetaProtocolError(`response line longer than ${MAX_LINE} bytes`);
        break;
      }
      if (nl - off > MAX_LINE) throw new MetaProtocolError(`response line longer than ${MAX_LINE} bytes`);
      if (nl === off || this.buf[nl - 1] !== 0x0d) throw new MetaProtocolError('response line not ended by CRLF');
      const line = this.buf.toString('latin1', off, nl - 1);
      off = nl + 1;
      const r = parseLine(line, this.maxValue);
      if (r instanceof MetaServerError) {
        out.push(r);
        continue;
      }
      if (r.head.status === 'VA') {
        this.pendingValue = { head: r.head, len: r.len };
        continue;
      }
      out.push(r.head);
    }
    this.buf = off >= this.buf.length ? Buffer.alloc(0) : this.buf.subarray(off);
    return out;
  }
}

function parseLine(line: string, maxValue: number): { head: MetaResponse; len: number } | MetaServerError {
  const sp = line.indexOf(' ');
  const code = sp < 0 ? line : line.slice(0, sp);
  let rest = sp < 0 ? '' : line.slice(sp + 1);
  if (ERRORS.has(code)) return new MetaServerError(code, rest);
  if (!STATUSES.has(code)) throw new MetaProtocolError(`unknown response ${JSON.stringify(line.slice(0, 64))}`);
  const head: MetaResponse = { status: code as MetaResponse['status'], opaque: 0, won: false, alreadyWon: false, stale: false };
  let len = -1;
  if (code === 'VA') {
    const sp2 = rest.indexOf(' ');
    const tok = sp2 < 0 ? rest : rest.slice(0, sp2);
    rest = sp2 < 0 ? '' : rest.slice(sp2 + 1);
    if (!DIGITS.test(tok) || tok.length > 10) throw new MetaProtocolError(`bad VA length in ${JSON.stringify(line.slice(0, 64))}`);
    len = Number(tok);
    if (len > maxValue) throw new MetaProtocolError(`value of ${len} bytes exceeds the ${maxValue}-byte limit`);
  }
  for (const tok of rest.split(' ')) {
    if (tok === '') continue;
    const arg = tok.slice(1);
    const num = (max: number): number => {
      if (!DIGITS.test(arg) || Number(arg) > max) throw new MetaProtocolError(`bad flag ${JSON.stringify(tok.slice(0, 64))}`);
      return Number(arg);
    };
    switch (tok[0]) {
      case 'O':
        head.opaque = num(0xffffffff);
        break;
      case 'c':
        if (!DIGITS.test(arg) || BigInt(arg) > 0xffffffffffffffffn) throw new MetaProtocolError(`bad flag ${JSON.stringify(tok.slice(0, 64))}`);
        head.cas = BigInt(arg);
        break;
      case 's':
        head.size = num(Number.MAX_SAFE_INTEGER);
        break;
      case 't':
        if (arg === '-1') head.ttl = -1;
        else head.ttl = num(Number.MAX_SAFE_INTEGER);
        break;
      case 'W':
        head.won = true;
        break;
      case 'Z':
        head.alreadyWon = true;
        break;
      case 'X':
        head.stale = true;
        break;
      default:
      // Flags kura does not ask for are ignored (a newer server may add some).
    }
  }
  return { head, len };
}

/** An answer or a failure, per request of a pipeline. */
export type Outcome = MetaResponse | Error | undefined;

interface Pending {
  /** Requests of this pipeline (quiet ones answer only when interesting). */
  n: number;
  quiet: boolean;
  outcomes: Outcome[];
  /** Index of the next answer for a non-quiet pipeline. */
  next: number;
  resolve: (o: Outcome[]) => void;
  reject: (err: Error) => void;
}

/** Options of a MetaConnection. */
export interface ConnOptions {
  /** Largest value accepted in an answer. Default 64 MiB. */
  maxValue?: number;
  /** Connect timeout (ms). Default 1000. */
  connectTimeout?: number;
  /**
   * How long answers may stop coming while requests wait (ms), as Go's
   * ReadTimeout: past it the connection is dropped and its requests fail,
   * so a stalled server does not collect requests without end. Default 3000.
   */
  readTimeout?: number;
}

/**
 * One connection to one server, pipelining requests in order. Reconnects
 * on the next request after a failure; a failure fails every request
 * still waiting on the connection.
 */
export class MetaConnection {
  private sock?: net.Socket;
  private parser?: ResponseParser;
  private readonly queue: Pending[] = [];
  private closed = false;
  // When answers last came (or the oldest waiting request was sent), for readTimeout.
  private lastProgress = 0;
  private watchdog?: NodeJS.Timeout;
  readonly host: string;
  readonly port: number;

  constructor(readonly addr: string, private readonly opts: ConnOptions = {}) {
    const i = addr.lastIndexOf(':');
    if (i <= 0) throw new Error(`kura: memcache: server ${JSON.stringify(addr)} is not host:port`);
    this.host = addr.slice(0, i).replace(/^\[(.*)\]$/, '$1');
    this.port = Number(addr.slice(i + 1));
    if (!Number.isInteger(this.port) || this.port <= 0 || this.port > 65535) throw new Error(`kura: memcache: server ${JSON.stringify(addr)} has a bad port`);
  }

  private connect(): net.Socket {
    const sock = net.connect({ host: this.host, port: this.port });
    sock.setNoDelay(true);
    const parser = new ResponseParser(this.opts.maxValue);
    const timer = setTimeout(() => sock.destroy(new Error(`kura: memcache ${this.addr}: connect timed out`)), this.opts.connectTimeout ?? 1000);
    sock.once('connect', () => clearTimeout(timer));
    sock.on('data', (chunk: Buffer) => {
      if (this.sock !== sock) return;
      this.lastProgress = performance.now();
      let answers;
      try {
        answers = parser.push(chunk);
      } catch (err) {
        this.fail(sock, err as Error);
        return;
      }
      for (const a of answers) this.answer(sock, a);
    });
    sock.on('error', (err) => this.fail(sock, err));
    sock.on('close', () => {
      clearTimeout(timer);
      this.fail(sock, new Error(`kura: memcache ${this.addr}: connection closed`));
    });
    this.sock = sock;
    this.parser = parser;
    return sock;
  }

  private fail(sock: net.Socket, err: Error): void {
    if (this.sock !== sock) return;
    this.sock = undefined;
    this.parser = undefined;
    sock.destroy();
    const e = err.message.includes(this.addr) ? err : new Error(`kura: memcache ${this.addr}: ${err.message}`, { cause: err });
    for (const p of this.queue.splice(0)) p.reject(e);
    this.stopWatchdog();
  }

  private startWatchdog(sock: net.Socket): void {
    if (this.watchdog) return;
    const limit = this.opts.readTimeout ?? 3000;
    this.watchdog = setInterval(() => {
      if (this.queue.length === 0) {
        this.stopWatchdog();
        return;
      }
      if (performance.now() - this.lastProgress > limit) this.fail(sock, new Error(`no answer for ${limit} ms`));
    }, Math.max(10, Math.floor(limit / 4)));
    this.watchdog.unref();
  }

  private stopWatchdog(): void {
    if (this.watchdog) clearInterval(this.watchdog);
    this.watchdog = undefined;
  }

  private answer(sock: net.Socket, a: MetaResponse | MetaServerError): void {
    const p = this.queue[0];
    if (!p) {
      this.fail(sock, new MetaProtocolError('an answer nobody asked for'));
      return;
    }
    if (!p.quiet) {
      p.outcomes[p.next++] = a;
      if (p.next === p.n) {
        this.queue.shift();
        p.resolve(p.outcomes);
      }
      return;
    }
    if (a instanceof MetaServerError) {
      // No O token: it belongs to one of the requests not answered yet.
      for (let i = 0; i < p.n; i++) if (p.outcomes[i] === undefined) p.outcomes[i] = a;
      return;
    }
    if (a.status === 'MN' && a.opaque === 0) {
      this.queue.shift();
      p.resolve(p.outcomes);
      return;
    }
    const i = a.opaque - 1;
    if (i < 0 || i >= p.n || (p.outcomes[i] !== undefined && !(p.outcomes[i] instanceof MetaServerError))) {
      this.fail(sock, new MetaProtocolError(`answer with O${a.opaque} in a pipeline of ${p.n}`));
      return;
    }
    p.outcomes[i] = a;
  }

  /**
   * Sends reqs as one pipeline and resolves one outcome per request: the
   * answer, an Error (a server error line, or a key with no wire form), or
   * undefined for a quiet request that had nothing interesting to say.
   * quiet: the requests are sent with q and O tokens and closed by mn.
   * Rejects when the connection fails before the pipeline is answered.
   */
  exec(reqs: MetaRequest[], quiet: boolean): Promise<Outcome[]> {
    if (this.closed) return Promise.reject(new Error(`kura: memcache ${this.addr}: closed`));
    const outcomes: Outcome[] = new Array(reqs.length).fill(undefined);
    const parts: Buffer[] = [];
    const sent: number[] = [];
    reqs.forEach((r, i) => {
      try {
        parts.push(encodeRequest(quiet ? { ...r, quiet: true } : r, quiet ? sent.length + 1 : 0));
        sent.push(i);
      } catch (err) {
        outcomes[i] = err as Error;
      }
    });
    if (sent.length === 0) return Promise.resolve(outcomes);
    if (quiet) parts.push(encodeRequest({ cmd: 'mn' }));
    const sock = this.sock ?? this.connect();
    if (this.queue.length === 0) this.lastProgress = performance.now();
    this.startWatchdog(sock);
    return new Promise<Outcome[]>((resolve, reject) => {
      const sub: Outcome[] = new Array(sent.length).fill(undefined);
      this.queue.push({
        n: sent.length,
        quiet,
        outcomes: sub,
        next: 0,
        resolve: (o) => {
          sent.forEach((i, j) => (outcomes[i] = o[j]));
          resolve(outcomes);
        },
        reject,
      });
      sock.write(parts.length === 1 ? parts[0] : Buffer.concat(parts));
    });
  }

  /** Closes the connection; waiting requests fail. */
  close(): void {
    this.closed = true;
    if (this.sock) this.fail(this.sock, new Error('closed'));
  }
}
