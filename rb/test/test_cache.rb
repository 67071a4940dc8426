# frozen_string_literal: true

require_relative 'helper'

# Kura::Cache on real servers: batching per server, negative caching,
# jitter, the size guard, index caches, stats, errors, fork, a stalled
# server and the breaker.
class TestCache < Minitest::Test
  def self.pool
    @pool ||= Array.new(3) { KuraTest::Servers.memcached }
  end

  def self.redis
    @redis ||= KuraTest::Servers.redis
  end

  # A generous budget: these tests check results, not timing, on a shared
  # machine where a loaded scheduler can outlast 250 ms.
  def memcache_store(**o)
    Kura::MemcacheStore.new(self.class.pool.map(&:first), **{ timeout: 5 }.merge(o))
  end

  def record(i)
    { 'id' => i, 'user_id' => 42, 'item_id' => 10_000 + i, 'name' => "item #{i} #{'x' * 200}", 'qty' => i % 7,
      'acquired_at' => 1_790_000_000 + i, 'flags' => %w[a b] }
  end

  # The seed's cold login: 5,000 records of ~300 B on 3 memcached servers.
  # Round trips counted: one per server for the write-back, against 5,000
  # for per-key writes.
  def test_cold_login_round_trips
    s = memcache_store(timeout: 5)
    c = Kura::Cache.new(s, ttl: 300)
    keys = Array.new(5000) { |i| "login:#{rand(1 << 30)}:item:#{i}" }
    calls = 0
    before = s.round_trips
    got = c.fetch_multi(*keys) do |missing|
      calls += 1
      missing.to_h { |k| [k, record(k[/\d+\z/].to_i)] }
    end
    trips = s.round_trips.to_h { |n, v| [n, v - before[n]] }
    assert_equal 1, calls
    assert_equal 5000, got.length
    assert_equal 3, trips.length
    # the read takes the leases (mg N, as Go's LeaseGet), then one fill: two pipelines per server
    trips.each_value { |v| assert_equal 2, v, trips.inspect }
    assert_equal 5000, c.stats[:writes]
    assert_operator record(1).then { |r| Kura::Codec.new.encode(r).bytesize }, :<, 400

    # Without leases: one read and one write-back per server.
    c2 = Kura::Cache.new(s, ttl: 300, leases: false)
    keys2 = keys.map { |k| "#{k}:b" }
    before = s.round_trips
    c2.fetch_multi(*keys2) { |m| m.to_h { |k| [k, record(1)] } }
    s.round_trips.each { |n, v| assert_equal 2, v - before[n] }

    # Per-key writes: one round trip a key.
    before = s.round_trips.values.sum
    keys.first(5000).each { |k| c2.write("#{k}:c", record(1), ttl: 300) }
    assert_equal 5000, s.round_trips.values.sum - before

    # Warm: one read per server, no block.
    before = s.round_trips
    assert_equal 5000, c.fetch_multi(*keys) { raise 'warm' }.length
    s.round_trips.each { |n, v| assert_equal 1, v - before[n] }
  end

  def test_negative_caching_jitter_and_stats
    [memcache_store, Kura::RedisStore.new(url: "redis://#{self.class.redis[0]}", timeout: 5)].each do |s|
      c = Kura::Cache.new(s, ttl: 100, negative_ttl: 30, ttl_jitter: 0.2)
      key = "neg:#{rand(1 << 30)}"
      calls = 0
      assert_nil c.fetch(key) { calls += 1; nil }
      assert_nil c.fetch(key) { calls += 1; 'x' }
      assert_equal 1, calls
      assert_equal 1, c.stats[:negative_hits]
      ttls = Array.new(200) { c.send(:jitter, 100) }
      assert ttls.all? { |t| t.between?(80_000, 100_000) }, ttls.minmax.inspect
      assert_operator ttls.uniq.length, :>, 50
    end
  end

  def test_size_guard
    log = StringIO.new
    c = Kura::Cache.new(memcache_store, max_value_size: 200_000, logger: Logger.new(log))
    big = Random.new(1).bytes(150_000).unpack1('H*')[0, 150_000]
    assert_equal big, c.fetch("big:#{rand(1 << 30)}") { big }
    assert_match(/is large: every read and write moves it whole/, log.string)
    huge = 'y' * 10_000 + Random.new(2).bytes(300_000).unpack1('H*')
    k = "huge:#{rand(1 << 30)}"
    assert_equal huge, c.fetch(k) { huge }
    assert_equal 1, c.stats[:too_large]
    assert_match(/not stored: over max_value_size.*8 s per SET/, log.string)
    calls = 0
    c.fetch(k) { calls += 1; 'z' }
    assert_equal 1, calls, 'a refused value is not cached'
    refute_includes log.string, huge[0, 50], 'no value in the log'
  end

  def test_index_cache
    c = Kura::Cache.new(memcache_store, ttl: 60)
    idx = "items:user:#{rand(1 << 30)}"
    loads = []
    ids = -> { loads << :ids; [5, 2, 9] }
    recs = ->(missing) { loads << missing.sort; missing.to_h { |i| [i, { 'id' => i }] } }
    key = ->(id) { "#{idx}:item:#{id}" }
    assert_equal [5, 2, 9], c.fetch_by_index(idx, record_key: key, ids: ids, records: recs).map { |r| r['id'] }
    c.invalidate(key.call(2))
    assert_equal [5, 2, 9], c.fetch_by_index(idx, record_key: key, ids: ids, records: recs).map { |r| r['id'] }
    assert_equal [:ids, [2, 5, 9], [2]], loads, 'only the missing record goes to the database'
  end

  def test_block_errors_reach_the_caller_cache_errors_do_not
    c = Kura::Cache.new(memcache_store)
    assert_raises(ZeroDivisionError) { c.fetch("err:#{rand(1 << 30)}") { 1 / 0 } }
    dead = Kura::Cache.new(Kura::MemcacheStore.new(["127.0.0.1:#{KuraTest::Servers.free_port}"], timeout: 0.1))
    assert_equal 7, dead.fetch('k') { 7 }
    assert_operator dead.stats[:store_errors], :>=, 1
    # hostile bytes under a key are a miss, replaced only while they are there
    s = memcache_store
    k = "hostile:#{rand(1 << 30)}"
    s.set_batch({ s.node_of(k) => [[k, KuraTest.hex('C14B01010000 05 DDFFFFFFFF'), 60_000]] })
    assert_equal 'ok', Kura::Cache.new(s).fetch(k) { 'ok' }
    assert_equal 'ok', Kura::Cache.new(s).fetch(k) { 'reloaded' }
  end

  # "No cache error ever reaches a fetch caller" (docs/ruby.md), per
  # operation, on each store a dead address can stand for: memcached,
  # Redis, and Redis shards. (A Cluster needs a seed that answers to start.)
  def test_dead_servers_are_misses_for_every_read
    port = KuraTest::Servers.free_port
    {
      'memcached' => -> { Kura::MemcacheStore.new(["127.0.0.1:#{port}"], timeout: 0.1) },
      'redis' => -> { Kura::RedisStore.new(url: "redis://127.0.0.1:#{port}/0", timeout: 0.1) },
      'redis shards' => -> { Kura::RedisStore.new(urls: ["redis://127.0.0.1:#{port}/0", "redis://127.0.0.1:#{port}/1"], timeout: 0.1) }
    }.each do |name, open|
      s = open.call
      c = Kura::Cache.new(s, ttl: 60)
      assert_equal 1, c.fetch('k') { 1 }, name
      assert_equal({ 'a' => 'a', 'b' => 'b' }, c.fetch_multi('a', 'b') { |m| m.to_h { |k| [k, k] } }, name)
      recs = c.fetch_by_index('idx', record_key: ->(i) { "r:#{i}" }, ids: -> { [1, 2] },
                                     records: ->(ids) { ids.to_h { |i| [i, { 'id' => i }] } })
      assert_equal [{ 'id' => 1 }, { 'id' => 2 }], recs, name
      assert_nil c.read('k'), name
      assert_equal({}, c.read_multi('a', 'b'), name)
      refute c.write('k', 1), name
      assert_operator c.stats[:store_errors], :>=, 1, name
    ensure
      s&.close
    end
  end

  def test_thread_safety
    c = Kura::Cache.new(memcache_store, ttl: 60)
    keys = Array.new(200) { |i| "ts:#{rand(1 << 30)}:#{i}" }
    errors = Queue.new
    Array.new(8) do |t|
      Thread.new do
        50.times do |j|
          ks = keys.sample(20, random: Random.new(t * 100 + j))
          got = c.fetch_multi(*ks) { |m| m.to_h { |k| [k, "v:#{k}"] } }
          errors << [ks, got] unless ks.all? { |k| got[k] == "v:#{k}" }
        end
      end
    end.each(&:join)
    assert errors.empty?, errors.size.to_s
  end

  # Puma, Unicorn and Passenger fork after the app loaded: the child must not
  # share the parent's sockets (interleaved answers) and must probe again.
  def test_after_fork
    s = memcache_store
    c = Kura::Cache.new(s, ttl: 60)
    key = "fork:#{rand(1 << 30)}"
    assert_equal 'parent', c.fetch(key) { 'parent' }
    parent_conns = s.instance_variable_get(:@pools).values.flatten.map(&:object_id)
    refute_empty parent_conns
    rd, wr = IO.pipe
    pid = fork do
      rd.close
      ok = Array.new(4) { Thread.new { 200.times.all? { c.fetch(key) { 'child' } == 'parent' } } }.map(&:value).all?
      mine = s.instance_variable_get(:@pools).values.flatten.map(&:object_id)
      wr.write(JSON.generate({ ok: ok, shared: (mine & parent_conns).length }))
      wr.close
      exit!(0)
    end
    wr.close
    # the parent keeps using its connections meanwhile
    200.times { assert_equal 'parent', c.fetch(key) { 'x' } }
    Process.wait(pid)
    out = JSON.parse(rd.read)
    assert out['ok'], 'child reads'
    assert_equal 0, out['shared'], 'the child opened its own connections'
  end

  # A down node's probe is a thread, which fork does not copy: the child
  # starts its own, and brings the node back when it answers.
  def test_probes_restart_after_fork
    port = KuraTest::Servers.free_port
    addr = "127.0.0.1:#{port}"
    s = Kura::MemcacheStore.new([addr], timeout: 0.1, health: { threshold: 1, interval: 0.05 })
    c = Kura::Cache.new(s)
    assert_equal 1, c.fetch('k') { 1 }
    refute s.health.up?(addr)
    rd, wr = IO.pipe
    pid = fork do
      rd.close
      down = !s.health.up?(addr) # the child's first use of the store
      # two probes at 0.05 s intervals; up to 3 s on a loaded machine
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 3
      sleep 0.05 until s.health.probes_sent >= 2 || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      wr.write(JSON.generate({ down: down, probes: s.health.probes_sent }))
      wr.close
      exit!(0)
    end
    wr.close
    Process.wait(pid)
    out = JSON.parse(rd.read)
    assert out['down']
    assert_operator out['probes'], :>=, 2, 'the child probes the down node itself'
  end

  # A stalled memcached (SIGSTOP): fetch returns the block's value within
  # its budget plus slack; after `threshold` failures the breaker sends the
  # node's keys straight to the block, with one probe in flight.
  def test_stalled_server
    addr, pid = KuraTest::Servers.memcached
    budget = 0.3
    s = Kura::MemcacheStore.new([addr], timeout: budget, health: { threshold: 3, interval: 0.2 })
    c = Kura::Cache.new(s, ttl: 60)
    assert_equal 'warm', c.fetch('stall') { 'warm' }
    Process.kill('STOP', pid)
    begin
      times = Array.new(20) do |i|
        t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        assert_equal "b#{i}", c.fetch("stall:#{i}") { "b#{i}" }
        Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
      end
      # each call may spend the budget on the read and again on the write-back
      assert_operator times.max, :<, (2 * budget) + 0.2, times.inspect
      # generous: a loaded scheduler adds tens of ms; the budget is 300
      assert_operator times.last(10).max, :<, 0.15, "breaker open: #{times.last(10).inspect}"
      refute s.health.up?(addr)
      $stderr.puts format('stalled fetch: first %d calls %.0f-%.0f ms (budget %.0f ms), then %.2f ms max with the breaker open',
                          times.count { |t| t > 0.05 }, times.select { |t| t > 0.05 }.min.to_f * 1000, times.max * 1000,
                          budget * 1000, times.last(10).max * 1000) if ENV['KURA_VERBOSE']
      sleep 0.5
      assert_operator s.health.probes_sent, :<=, 4
    ensure
      Process.kill('CONT', pid)
    end
    deadline = Time.now + 3
    sleep 0.05 until s.health.up?(addr) || Time.now > deadline
    assert s.health.up?(addr), 'a probe brings the node back'
    assert_equal 'warm', c.fetch('stall') { 'cold' }
  end
end
require 'stringio'
require 'logger'
