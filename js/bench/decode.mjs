// Decoding one ~1 KB article record, µs of CPU per call (process.cpuUsage:
// on a shared machine wall time also counts the time other jobs run), in one process: kura's
// msgpack reader (checkMsgPack's bound walk + @msgpack/msgpack's Decoder),
// the bare @msgpack/msgpack Decoder and msgpackr on the same bytes,
// JSON.parse of the same record, and kura's whole envelope decode (header +
// S2 + msgpack).
// Interleaved rounds, medians. Run: cd js && npm run build && node bench/decode.mjs
import { Unpackr } from 'msgpackr';
import { Decoder } from '@msgpack/msgpack';
import { Codec, parseHeader, s2Decode, decodeMsgPack } from '../dist/index.js';
import { record } from './record.mjs';

const codec = new Codec();
const vals = Array.from({ length: 1000 }, (_, i) => codec.encode(record(i), { written: Date.now(), ttl: 3_600_000, schema: 123 }));
const raws = vals.map((v) => {
  const h = parseHeader(v);
  return s2Decode(v.subarray(h.len), h.rawLen);
});
const jsons = Array.from({ length: 1000 }, (_, i) => JSON.stringify(record(i)));
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: 'number' });
const bare = new Decoder();
const cases = {
  'JSON.parse (string)': (i) => JSON.parse(jsons[i]),
  'msgpackr unpack': (i) => unpackr.unpack(raws[i]),
  '@msgpack/msgpack Decoder (bare)': (i) => bare.decode(raws[i]),
  'kura decodeMsgPack (bound walk + @msgpack)': (i) => decodeMsgPack(raws[i]),
  'kura Codec.decode (header + S2 + msgpack)': (i) => codec.decode(vals[i]),
};
const res = Object.fromEntries(Object.keys(cases).map((k) => [k, []]));
for (let round = 0; round < 9; round++) {
  for (const [name, f] of Object.entries(cases)) {
    const c0 = process.cpuUsage();
    for (let r = 0; r < 20; r++) for (let i = 0; i < 1000; i++) f(i);
    const cu = process.cpuUsage(c0);
    res[name].push((cu.user + cu.system) / 20_000);
  }
}
const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
for (const [name, a] of Object.entries(res)) console.log(`  ${name.padEnd(44)} ${median(a).toFixed(2)} µs`);
