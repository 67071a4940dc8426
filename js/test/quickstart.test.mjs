// The Node quick starts of docs/node.md and js/README.md, tried as a user
// would: `npm pack` the checkout, install the tarball in a fresh default
// (CommonJS) directory, run each example against a private redis-server,
// as an ES module and from CommonJS; each must exit by itself. npm test has built
// dist/ already, so packing skips the prepare script; the install prefers
// npm's cache, which npm ci filled.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { jsDir, startRedis, serverSkip } from './helpers.mjs';

const skip = serverSkip();

const example = `
import { Cache, RedisStore, HealthStore } from '@kuracache/kura';

const redis = new RedisStore({ addr: process.env.REDIS_ADDR });
const store = new HealthStore(redis, { probeTimeout: 2000 }); // the docs use the defaults; a test machine shared with other builds can take 200 ms to answer a PING
const users = new Cache(store, { name: 'users', ttl: 60_000, ttlJitter: 0.1, storeTimeout: 5000 });

let loads = 0;
const db = { user: async (id) => { loads++; return { id, name: 'user ' + id }; } };
const a = await users.fetch('user:1', () => db.user(1));
const b = await users.fetch('user:1', () => db.user(1));
const many = await users.fetchMany(['user:1', 'user:2'], async (keys) => new Map(keys.map((k) => [k, { id: k, name: k }])));
await users.invalidate('user:1');
console.log(JSON.stringify({ a, b, loads, many: [...many.keys()], hits: users.stats().hits, node: store.stats()[0].state }));
await store.close();
await redis.close();
`;

// The quick starts of js/README.md, as written there, each in a fresh
// default (CommonJS) project. Two changes: the address, and a store budget
// of 5 s instead of 250 ms (a test machine shared with other builds can
// take longer than that to answer, and the loader would then serve).
function asTested(src) {
  const out = src.replace("'127.0.0.1:6379'", 'process.env.REDIS_ADDR').replace('{ ttl: 60_000 }', '{ ttl: 60_000, storeTimeout: 5000 }');
  assert.ok(out.includes('process.env.REDIS_ADDR') && out.includes('storeTimeout'), 'the quick start no longer has the address and options the test replaces');
  return out;
}
function readmeBlock(name) {
  const readme = fs.readFileSync(path.join(jsDir, 'README.md'), 'utf8');
  const m = readme.match(new RegExp(`<!-- quickstart: ${name} -->\\n\`\`\`js\\n([\\s\\S]*?)\`\`\``));
  assert.ok(m, `js/README.md has no quick start block "${name}"`);
  return m[1];
}

// run runs a script and fails, instead of hanging the suite, when it does
// not exit by itself.
function run(app, file, addr) {
  return execFileSync('node', [file], { cwd: app, encoding: 'utf8', timeout: 60_000, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, REDIS_ADDR: addr } });
}

test('quick start: npm pack, install in a fresh directory, run the example', { skip, timeout: 240_000 }, async () => {
  const redis = await startRedis();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kura-quickstart-'));
  try {
    const packed = execFileSync('npm', ['pack', '--silent', '--ignore-scripts', '--pack-destination', dir], { cwd: jsDir, encoding: 'utf8' }).trim().split('\n').pop();
    const tgz = path.join(dir, packed);
    assert.ok(fs.existsSync(tgz), tgz);
    const app = path.join(dir, 'app');
    fs.mkdirSync(app);
    // A default project: CommonJS unless a file says otherwise (.mjs).
    fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', private: true }));
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--ignore-scripts', tgz], { cwd: app, stdio: 'ignore' });
    // Only the built package is installed, with its README: no sources, no tests.
    const installed = path.join(app, 'node_modules', '@kuracache', 'kura');
    assert.ok(fs.existsSync(path.join(installed, 'dist', 'index.d.ts')));
    assert.ok(fs.existsSync(path.join(installed, 'README.md')), 'js/README.md ships in the package');
    assert.ok(!fs.existsSync(path.join(installed, 'src')));
    fs.writeFileSync(path.join(app, 'main.mjs'), example);
    const out = JSON.parse(run(app, 'main.mjs', redis.addr));
    assert.deepEqual(out.a, { id: 1, name: 'user 1' });
    assert.deepEqual(out.b, out.a);
    assert.equal(out.loads, 1);
    assert.deepEqual(out.many.sort(), ['user:1', 'user:2']);
    assert.equal(out.hits, 2);
    assert.equal(out.node, 'up');

    // js/README.md's ES module quick start: prints what the README says, twice, and exits.
    const esm = asTested(readmeBlock('esm'));
    fs.writeFileSync(path.join(app, 'readme.mjs'), esm);
    assert.equal(run(app, 'readme.mjs', redis.addr).trim(), 'lamp lamp loads: 1 hits: 1');
    assert.equal(run(app, 'readme.mjs', redis.addr).trim(), 'lamp lamp loads: 0 hits: 2');
    // The CommonJS one, as main.js of the default project.
    const cjs = asTested(readmeBlock('cjs'));
    fs.writeFileSync(path.join(app, 'main.js'), cjs);
    assert.equal(run(app, 'main.js', redis.addr).trim(), 'lamp');
    // require() fails with a message that says what to do.
    fs.writeFileSync(path.join(app, 'req.js'), "require('@kuracache/kura');\n");
    let msg = '';
    try { run(app, 'req.js', redis.addr); } catch (err) { msg = String(err.stderr); }
    assert.match(msg, /is an ES module and cannot be loaded with require\(\)/);
    assert.match(msg, /await import\('@kuracache\/kura'\)/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
    await redis.stop();
  }
});
