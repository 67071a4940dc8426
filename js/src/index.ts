/**
 * kura for Node.js: read-through caching on Redis with the same value
 * format, lease protocol and health model as the Go package
 * github.com/kuracache/kura, so Node and Go services share one cache.
 */
export * from './codec.js';
export { fingerprint, schema, parseSchema, named, SchemaError, MAX_SCHEMA_LEN, MAX_SCHEMA_DEPTH, type SchemaNode } from './schema.js';
export { s2Encode, s2Decode, parseS2Dict, s2DictBytes, type S2Dict } from './s2.js';
export { checkMsgPack, checkJSON, allocBound, MAX_DEPTH } from './check.js';
export { zstdAvailable } from './zstd.js';
export { ValueTooLargeError } from './errors.js';
export { Cache, cacheDefaults, type CacheOptions, type CacheStats, type FetchOptions, type Loader, type ManyLoader, type Op } from './cache.js';
export { RedisStore, type RedisStoreOptions } from './redis.js';
export { HealthStore, NodeDownError, healthDefaults, type HealthOptions, type NodeState, type NodeStats, type Transition } from './health.js';
export { NodeError, groupByNode, type Store, type SetItem, type Prober } from './store.js';
export { MemcacheStore, type MemcacheStoreOptions } from './memcache/store.js';
export { KetamaRing, type RingServer } from './memcache/ring.js';
export { wireKey, ResponseParser, MetaConnection, MetaProtocolError, MetaServerError, encodeRequest, ttlSeconds, type MetaRequest, type MetaResponse } from './memcache/meta.js';
