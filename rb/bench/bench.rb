# frozen_string_literal: true

# Benchmarks of the Ruby package against Rails' stores, side by side in one
# run, interleaved, medians with spreads (docs/benchmarks/ruby.md):
#
#   ruby -Ilib -Itest bench/bench.rb            # everything (about 2 minutes)
#   KURA_BENCH=login,read,bytes ruby -Ilib -Itest bench/bench.rb
#
# Sizes: KURA_BENCH_KEYS (records per login, 5,000), KURA_BENCH_PROXY_ONLY
# (skip the loopback login), KURA_BENCH_LOGIN_ROUNDS / _RAILS_ROUNDS /
# _PERKEY_ROUNDS (through the proxy: 9, 3, 1), KURA_BENCH_READS (300).
# RESULTS_JSON=<file> also writes every side's figures per round, as
# {"<part>: <side>": [per round]} (milliseconds, or bytes for "bytes:"),
# for make bench-report (internal/harness/benchreport); the read part's
# rounds are KURA_BENCH_READ_ROUNDS (3) equal runs of its interleaved calls.
#
# login: the seed's cold login, 5,000 records of ~300 B on 3 memcached
#   servers: kura fetch_multi (one read, one block call, one write-back per
#   server) vs Rails 6.1 MemCacheStore#fetch_multi (dalli) vs per-key
#   writes, on loopback and through the harness's delay proxy (3 ms a round trip).
# read: warm read_multi of 100 keys: kura vs MemCacheStore and RedisCacheStore.
# bytes: the seed's record as a Hash and as an ActiveModel object, kura's
#   envelope versions vs Rails' default (Marshal of the entry, zlib above 1 KB).
# stall: fetch against a SIGSTOPped memcached with the breaker off: how far
#   past its budget (100 ms) each call returns the block's value.
require 'kura'
require 'helper'
require 'active_support'
require 'active_support/cache'
require 'active_support/cache/mem_cache_store'
require 'active_support/cache/redis_cache_store'
require 'active_support/cache/kura_store'
require 'active_model'
require 'dalli'
require 'open3'

Dalli.logger.level = Logger::ERROR
PARTS = ENV.fetch('KURA_BENCH', 'bytes,login,read,stall').split(',')
# Every side's figures per round, written to RESULTS_JSON at the end.
RESULTS = Hash.new { |h, k| h[k] = [] }

def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

def stats(xs)
  s = xs.sort
  med = s[s.length / 2]
  format('median %.1f ms (min %.1f, max %.1f, n=%d)', med * 1000, s.first * 1000, s.last * 1000, s.length)
end

def median(xs) = xs.sort[xs.length / 2]

def load_line
  File.read('/proc/loadavg').split.first(3).join(' ')
end

require_relative 'record'

# An ActiveModel object with the record's attributes, as a Rails app holds a row.
class UserItem
  include ActiveModel::Model
  include ActiveModel::Attributes
  %w[id user_id item_id level exp luck plus_hp plus_atk plus_spd skill_level].each { |a| attribute a, :integer }
  %w[locked favorite].each { |a| attribute a, :boolean }
  %w[created_at updated_at].each { |a| attribute a, :datetime }
  attribute :note, :string
end

puts "# kura Ruby benchmarks, #{Time.now.utc.iso8601}, ruby #{RUBY_VERSION}, load #{load_line}, #{`nproc`.strip} cores"

if PARTS.include?('bytes')
  puts "\n## bytes of the seed's record (user-item row, ~300 B)"
  h = record(7)
  m = UserItem.new(**h.transform_keys(&:to_sym))
  rails = ->(v) { e = ActiveSupport::Cache::Entry.new(v, compress: true, compress_threshold: 1024); Marshal.dump(e).bytesize }
  [['Hash', h], ['ActiveModel object', m]].each do |name, v|
    base = rails.call(v)
    puts "#{name}: Rails default (Marshal of the entry, zlib above 1 KB) #{base} B"
    { 'version 2 (msgpack, Snappy above 256 B)' => Kura::Codec.new,
      'version 2, as a Cache writes it (schema + write time)' => [Kura::Codec.new, true],
      'version 3 compact (the default)' => Kura::Codec.new(compact: true),
      'version 3 compact, as a Cache writes it' => [Kura::Codec.new(compact: true), true] }.each do |label, (c, full)|
      c ||= Kura::Codec.new
      n = full ? c.encode(v, schema: 0x12345678, written: 1_790_000_000_000).bytesize : c.encode(v).bytesize
      puts format('  kura %-58s %4d B  %.2fx', label, n, n.to_f / base)
    end
  end
  # For RESULTS_JSON: the Hash row at several ids (its numbers and note
  # change length), the default codec as a Cache writes it against Rails'.
  [7, 99, 1000, 2500, 4999].each do |i|
    v = record(i)
    RESULTS['bytes: Rails default (Hash)'] << rails.call(v)
    RESULTS['bytes: kura as a Cache writes it (Hash)'] << Kura::Codec.new(compact: true).encode(v, schema: 0x12345678, written: 1_790_000_000_000).bytesize
  end
end

if PARTS.include?('login')
  pool = Array.new(3) { KuraTest::Servers.memcached[0] }
  helper = KuraTest.go_helper
  keys_n = Integer(ENV.fetch('KURA_BENCH_KEYS', 5000))
  records = Array.new(keys_n) { |i| record(i) }
  run_side = lambda do |label, store_addrs, rounds, per_key_rounds, rails_rounds = rounds, part: label|
    mc = Kura::MemcacheStore.new(store_addrs, timeout: 30)
    kura = Kura::Cache.new(mc, ttl: 3600)
    kura_nolease = Kura::Cache.new(mc, ttl: 3600, leases: false)
    rails = ActiveSupport::Cache::MemCacheStore.new(*store_addrs, expires_in: 3600, socket_timeout: 30)
    t = Hash.new { |hh, k| hh[k] = [] }
    trips = nil
    rounds.times do |r|
      pfx = "login:#{label}:#{r}:#{rand(1 << 30)}"
      keys = Array.new(keys_n) { |i| "#{pfx}:item:#{i}" }
      by = keys.each_with_index.to_h
      sides = [
        ['kura fetch_multi (leases)', lambda {
          before = mc.round_trips
          kura.fetch_multi(*keys.map { |k| "#{k}:a" }) { |miss| miss.to_h { |k| [k, records[by[k.delete_suffix(':a')]]] } }
          trips = mc.round_trips.to_h { |n, v| [n, v - before[n]] }
        }],
        ['kura fetch_multi (leases off)', lambda {
          kura_nolease.fetch_multi(*keys.map { |k| "#{k}:b" }) { |miss| miss.to_h { |k| [k, records[by[k.delete_suffix(':b')]]] } }
        }],
      ]
      if r < rails_rounds
        sides << ['Rails MemCacheStore#fetch_multi', lambda {
          rails.fetch_multi(*keys.map { |k| "#{k}:c" }) { |k| records[by[k.delete_suffix(':c')]] }
        }]
      end
      if r < per_key_rounds
        sides << ['kura per-key writes', lambda {
          keys.each_with_index { |k, i| kura_nolease.write("#{k}:d", records[i], ttl: 3600) }
        }]
      end
      sides.rotate(r).each do |name, fn|
        t0 = now
        fn.call
        t[name] << (now - t0)
      end
    end
    puts "\n## cold login, #{keys_n} records, 3 memcached servers, #{label} (load #{load_line})"
    base = median(t['kura fetch_multi (leases)'])
    t.each { |name, xs| puts format('  %-34s %s  %.1fx kura', name, stats(xs), median(xs) / base) }
    t.each { |name, xs| RESULTS["login #{part}: #{name}"].concat(xs.map { |x| x * 1000 }) }
    puts "  round trips per server, kura fetch_multi with leases: #{trips.values.inspect} (a read that takes the leases, a fill)"
    mc.close
  end
  run_side.call('loopback', pool, 5, 3) unless ENV['KURA_BENCH_PROXY_ONLY']
  proxy_rounds = Integer(ENV.fetch('KURA_BENCH_LOGIN_ROUNDS', 9))
  proxy_rails = Integer(ENV.fetch('KURA_BENCH_RAILS_ROUNDS', 3))
  proxy_perkey = Integer(ENV.fetch('KURA_BENCH_PERKEY_ROUNDS', 1))
  Open3.popen2(helper, 'proxy', ENV.fetch('KURA_BENCH_RTT_MS', '3'), *pool) do |stdin, stdout, _|
    proxied = JSON.parse(stdout.gets)
    # the per-key side costs keys_n round trips (about 15 s at 3 ms): one round
    # kura's sides take about a second: 9 rounds; Rails' 3, per-key 1
    run_side.call("through the delay proxy (#{ENV.fetch('KURA_BENCH_RTT_MS', '3')} ms a round trip)", proxied,
                  proxy_rounds, proxy_perkey, proxy_rails, part: 'proxy')
    stdin.close
  end
end

if PARTS.include?('read')
  mcs = KuraTest::Servers.memcached[0]
  rds = KuraTest::Servers.redis[0]
  keys = Array.new(100) { |i| "warm:#{i}" }
  vals = keys.each_with_index.to_h { |k, i| [k, record(i)] }
  sides = {
    'kura Cache#read_multi, memcached' => Kura::Cache.new(Kura::MemcacheStore.new([mcs])),
    'kura_store#read_multi, memcached' => ActiveSupport::Cache::KuraStore.new([mcs]),
    'MemCacheStore#read_multi (dalli)' => ActiveSupport::Cache::MemCacheStore.new(mcs),
    'kura Cache#read_multi, Redis' => Kura::Cache.new(Kura::RedisStore.new(url: "redis://#{rds}")),
    'kura_store#read_multi, Redis' => ActiveSupport::Cache::KuraStore.new(redis: "redis://#{rds}"),
    'RedisCacheStore#read_multi' => ActiveSupport::Cache::RedisCacheStore.new(url: "redis://#{rds}/0")
  }
  sides.each do |name, c|
    pre = name.tr(' #:,()', '______')
    c.write_multi(vals.transform_keys { |k| "#{pre}#{k}" })
  end
  n = Integer(ENV.fetch('KURA_BENCH_READS', 300))
  t = Hash.new { |h, k| h[k] = [] }
  n.times do |i|
    sides.to_a.rotate(i % sides.length).each do |name, c|
      pre = name.tr(' #:,()', '______')
      ks = keys.map { |k| "#{pre}#{k}" }
      t0 = now
      got = c.read_multi(*ks)
      t[name] << (now - t0)
      raise "#{name}: #{got.length} hits" unless got.length == 100
    end
  end
  puts "\n## warm read_multi of 100 records (~300 B each), #{n} calls per side, interleaved (load #{load_line})"
  read_rounds = Integer(ENV.fetch('KURA_BENCH_READ_ROUNDS', 3))
  t.each do |name, xs|
    xs.each_slice((xs.length.to_f / read_rounds).ceil) { |part| RESULTS["read: #{name}"] << median(part) * 1000 }
  end
  { 'memcached' => 'MemCacheStore#read_multi (dalli)', 'Redis' => 'RedisCacheStore#read_multi' }.each do |be, peer|
    pm = median(t[peer])
    t.select { |name, _| name.include?(be) || name == peer }.each do |name, xs|
      puts format('  %-36s median %.3f ms (p10 %.3f, p90 %.3f)  %.2fx %s', name, median(xs) * 1000,
                  xs.sort[xs.length / 10] * 1000, xs.sort[xs.length * 9 / 10] * 1000, pm / median(xs), name == peer ? '' : "(#{peer.split('#').first} / this)")
    end
  end
  # where kura's time goes per value, interleaved
  c = Kura::Codec.new(compact: true)
  b = c.encode(record(1), written: 1_790_000_000_000)
  raw = Kura::Codec.new(compressor: :none).serialize(record(1))
  fac = MessagePack::Factory.new
  fac.register_type(-1, Time, packer: MessagePack::Time::Packer, unpacker: MessagePack::Time::Unpacker)
  ent = Marshal.dump(ActiveSupport::Cache::Entry.new(record(1)))
  fns = { 'kura decode (whole envelope)' => -> { c.decode(b) }, 'msgpack-ruby load of its payload' => -> { fac.load(raw) },
          'Rails: Marshal.load of the entry' => -> { Marshal.load(ent) } }
  per = Hash.new { |h, k| h[k] = [] }
  15.times do |r|
    fns.to_a.rotate(r).each do |name, f|
      t0 = now
      2000.times { f.call }
      per[name] << (now - t0) / 2000
    end
  end
  puts "  per value (15 interleaved rounds of 2,000): " +
       per.map { |n, xs| format('%s median %.1f µs (min %.1f)', n, median(xs) * 1e6, xs.min * 1e6) }.join('; ')
end

if PARTS.include?('stall')
  addr, pid = KuraTest::Servers.memcached
  budget = 0.1
  c = Kura::Cache.new(Kura::MemcacheStore.new([addr], timeout: budget, health: false), ttl: 60)
  c.fetch('warm') { 1 }
  Process.kill('STOP', pid)
  over = Array.new(Integer(ENV.fetch('KURA_BENCH_STALLS', 100))) do |i|
    t0 = now
    c.fetch("stall:#{i}") { i }
    now - t0 - budget
  end
  Process.kill('CONT', pid)
  s = over.sort
  pct = ->(q) { s[[(s.length * q).ceil - 1, 0].max] * 1000 }
  puts "\n## a SIGSTOPped memcached, breaker off, budget #{(budget * 1000).round} ms, #{s.length} fetches (load #{load_line})"
  puts format('  overshoot past the budget: min %.2f ms, median %.2f, p90 %.2f, p99 %.2f, max %.2f', s.first * 1000, pct.call(0.5), pct.call(0.9), pct.call(0.99), s.last * 1000)
end

if (out = ENV['RESULTS_JSON'])
  File.write(out, JSON.generate(RESULTS))
end
