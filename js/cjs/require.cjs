'use strict';
// What require('@kuracache/kura') finds (package.json "exports", condition
// "require"). The package is an ES module whose zstd support loads a
// WebAssembly module with a top-level await, which require() cannot load
// (not even where Node can require() ES modules): say what works instead.
const err = new Error(
  "@kuracache/kura is an ES module and cannot be loaded with require(). From CommonJS, import it:\n" +
  "  const { Cache, RedisStore } = await import('@kuracache/kura'); // inside an async function\n" +
  "or make your file an ES module (name it .mjs, or set \"type\": \"module\" in package.json) and use\n" +
  "  import { Cache, RedisStore } from '@kuracache/kura';\n" +
  "js/README.md shows both.");
err.code = 'KURA_ESM_ONLY';
throw err;
