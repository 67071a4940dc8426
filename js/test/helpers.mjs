// Test harness: private redis-server processes on free loopback ports, as
// the Go tests' internal/harness/servers starts them. Under CI=true (or
// KURA_REQUIRE_SERVERS=1) a missing server binary is a failure, not a skip.
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const required = process.env.CI === 'true' || process.env.KURA_REQUIRE_SERVERS === '1';
export const jsDir = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
export const repoDir = path.join(jsDir, '..');

export function lookPath(name) {
  for (const dir of [...(process.env.PATH ?? '').split(':'), '/usr/sbin', '/usr/local/sbin', '/sbin', '/usr/bin']) {
    const p = path.join(dir, name);
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch { /* next */ }
  }
  return undefined;
}

/** Why a server test cannot run here (undefined when it can); throws under CI. */
export function serverSkip(name = 'redis-server') {
  if (lookPath(name)) return undefined;
  if (required) throw new Error(`${name} not installed (run make servers)`);
  return `${name} not installed (run make servers)`;
}

export async function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

async function waitPort(port, ms = 10_000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const ok = await new Promise((resolve) => {
      const c = net.connect(port, '127.0.0.1');
      c.once('connect', () => { c.destroy(); resolve(true); });
      c.once('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`port ${port} did not open`);
}

/** Starts a private redis-server; returns { addr, port, proc, stop, stall, resume }. */
export async function startRedis(extra = []) {
  const bin = lookPath('redis-server');
  return startOwned('redis', async (port) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kura-js-redis-'));
    const proc = spawn(bin, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...extra], { stdio: 'ignore' });
    return { proc, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
  });
}

/**
 * Starts a server on a free port and makes sure the server answering there
 * is the process it started: between freePort() closing the port and the
 * server binding it, another job on this machine may take it, and a test
 * would then talk to (and SIGSTOP the wrong pid for) somebody else's server.
 * Asks the server for its pid (Redis INFO, memcached stats); tries another
 * port when it is not ours.
 */
async function startOwned(kind, spawnAt) {
  for (let attempt = 0; ; attempt++) {
    const port = await freePort();
    const { proc, cleanup } = await spawnAt(port);
    const h = serverHandle(proc, port, cleanup);
    try {
      await waitPort(port);
      if ((await serverPid(kind, port)) === proc.pid) return h;
    } catch (err) {
      if (attempt >= 4) {
        await h.stop();
        throw err;
      }
    }
    await h.stop();
    if (attempt >= 4) throw new Error(`${kind}: could not start on a port of its own`);
  }
}

/** The pid of the server on port (Redis: INFO server; memcached: stats). */
function serverPid(kind, port) {
  return new Promise((resolve, reject) => {
    const c = net.connect(port, '127.0.0.1');
    let got = '';
    const timer = setTimeout(() => { c.destroy(); reject(new Error(`${kind} on ${port}: no pid in time`)); }, 5000);
    c.once('connect', () => c.write(kind === 'redis' ? 'INFO server\r\n' : 'stats\r\n'));
    c.on('data', (d) => {
      got += d.toString('latin1');
      const m = kind === 'redis' ? /process_id:(\d+)/.exec(got) : /STAT pid (\d+)/.exec(got);
      if (m) {
        clearTimeout(timer);
        c.destroy();
        resolve(Number(m[1]));
      }
    });
    c.once('error', (err) => { clearTimeout(timer); reject(err); });
  });
}

/** What a started server process is to a test: its address, SIGSTOP/SIGCONT, and stop. */
function serverHandle(proc, port, cleanup = () => {}) {
  let stopped = false;
  return {
    addr: `127.0.0.1:${port}`,
    port,
    proc,
    // SIGSTOP takes effect when the server's threads are next scheduled,
    // not when kill returns: wait until every thread is stopped, or a
    // request sent at once may still be answered.
    stall: async () => {
      process.kill(proc.pid, 'SIGSTOP');
      const tasks = `/proc/${proc.pid}/task`;
      for (let i = 0; i < 5000; i++) {
        const states = fs.readdirSync(tasks).map((t) => {
          try {
            return fs.readFileSync(`${tasks}/${t}/stat`, 'latin1').replace(/^.*\) /s, '')[0];
          } catch {
            return 'T'; // a thread that ended
          }
        });
        if (states.every((c) => c === 'T' || c === 't')) return;
        await new Promise((r) => setTimeout(r, 1));
      }
      throw new Error(`server ${proc.pid} did not stop`);
    },
    resume: () => process.kill(proc.pid, 'SIGCONT'),
    stop: async () => {
      if (stopped) return;
      stopped = true;
      try { process.kill(proc.pid, 'SIGCONT'); } catch { /* gone */ }
      proc.kill('SIGKILL');
      await new Promise((r) => (proc.exitCode !== null ? r() : proc.once('exit', r)));
      cleanup();
    },
  };
}

/** Starts a private memcached; returns { addr, port, proc, stop, stall, resume }. */
export async function startMemcached() {
  const bin = lookPath('memcached');
  return startOwned('memcached', async (port) => ({
    proc: spawn(bin, ['-l', '127.0.0.1', '-p', String(port), '-U', '0', '-m', '64', '-t', '2', '-u', 'root'], { stdio: 'ignore' }),
  }));
}

/** Starts a pool of n memcached servers; addr is the "memcache://a,b,c" form the Go helper takes. */
export async function startMemcachedPool(n = 3) {
  const nodes = await Promise.all(Array.from({ length: n }, () => startMemcached()));
  return { nodes, servers: nodes.map((m) => m.addr), addr: `memcache://${nodes.map((m) => m.addr).join(',')}`, stop: () => Promise.all(nodes.map((m) => m.stop())) };
}

/** Starts a Redis Cluster of `masters` redis-servers (no replicas). */
export async function startCluster(masters = 3) {
  const nodes = [];
  for (let i = 0; i < masters; i++) {
    nodes.push(await startRedis(['--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${i}.conf`, '--cluster-node-timeout', '2000', '--cluster-require-full-coverage', 'no']));
  }
  const cli = lookPath('redis-cli');
  execFileSync(cli, ['--cluster', 'create', ...nodes.map((n) => n.addr), '--cluster-yes'], { stdio: 'ignore' });
  // Wait until every node reports the cluster ok.
  const end = Date.now() + 20_000;
  for (const n of nodes) {
    for (;;) {
      const info = execFileSync(cli, ['-p', String(n.port), 'cluster', 'info']).toString();
      if (info.includes('cluster_state:ok')) break;
      if (Date.now() > end) throw new Error('cluster did not become ok');
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return { nodes, addrs: nodes.map((n) => n.addr), stop: () => Promise.all(nodes.map((n) => n.stop())) };
}

/** The Go interop helper: built by `make test` (or here, once) from internal/harness/nodeinterop. */
export function interopBinary() {
  const p = process.env.KURA_NODEINTEROP ?? path.join(jsDir, '.build', 'nodeinterop');
  if (!fs.existsSync(p)) {
    execFileSync('go', ['build', '-o', p, './internal/harness/nodeinterop'], { cwd: repoDir, stdio: 'inherit' });
  }
  return p;
}

export function runInterop(cmd, addr, prefix) {
  const out = execFileSync(interopBinary(), [cmd, addr, prefix], { encoding: 'utf8' });
  return JSON.parse(out);
}

/** A seeded xorshift32 generator in [0, 1): the fuzz loops replay the same inputs every run. */
export function rng(seed) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    return s / 0x100000000;
  };
}
