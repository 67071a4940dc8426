# frozen_string_literal: true

require_relative 'helper'
require 'open3'
require_relative 'fixtures/backend'

# Leases shared with Go and Node (docs/leases.md): the same placeholders,
# tokens and fill script on Redis, memcached's own mg N / ms C leases, so a
# stampede of Go, Node and Ruby processes on one cold key loads once, and an
# invalidation from any runtime voids the others' in-flight fills.
class TestLeases < Minitest::Test
  def self.backends
    @backends ||= begin
      m1, = KuraTest::Servers.memcached
      m2, = KuraTest::Servers.memcached
      r, = KuraTest::Servers.redis
      { 'memcached' => "memcache://#{m1},#{m2}", 'redis' => r }
    end
  end

  def node_helper = KuraTest.node_interop

  # Each backend: its name, address, a KuraBackend and a Cache over its
  # store (closed after).
  def each_cache
    self.class.backends.each do |be, addr|
      b = KuraBackend.open(addr)
      begin
        yield be, addr, b, Kura::Cache.new(b.store, ttl: 60)
      ensure
        b.store.close
      end
    end
  end

  def node_stampede_cmd(addr, key, callers, sleep_ms, value, procs)
    dist = File.join(KuraTest::ROOT, 'js', 'dist', 'index.js')
    unless File.exist?(dist)
      raise 'js/dist missing: make test-node builds it' if ENV['KURA_REQUIRE_SERVERS'] == '1'

      return nil
    end
    ['node', File.join(KuraTest::ROOT, 'js', 'test', 'fixtures', 'stampede.mjs'), addr, key, callers.to_s, sleep_ms.to_s, value, procs.to_s]
  end

  def ruby_cmd(*args)
    ['ruby', File.join(__dir__, 'fixtures', 'stampede.rb'), *args.map(&:to_s)]
  end

  def test_mixed_stampede_loads_once
    self.class.backends.each do |be, addr|
      b = KuraBackend.open(addr)
      3.times do |round|
        key = "stampede:#{be}:#{round}:#{rand(1 << 30)}"
        value = "v#{round}"
        node = node_stampede_cmd(addr, key, 8, 150, value, 6)
        procs = node ? 6 : 4
        cmds = [[node_helper, 'stampede', addr, key, '8', '150', value, procs.to_s]] * 2 +
               [ruby_cmd(addr, key, 8, 150, value, procs)] * 2
        cmds += [node_stampede_cmd(addr, key, 8, 150, value, procs)] * 2 if node
        threads = cmds.map { |cmd| Thread.new { Open3.capture3(*cmd) } }
        outs = threads.map(&:value)
        outs.each_with_index do |(out, err, st), i|
          assert st.success?, "#{be} process #{i} (#{cmds[i][0..1].join(' ')}): #{err}"
          assert_equal [value] * 8, JSON.parse(out)['values'], "#{be} process #{i}"
        end
        assert_equal 1, b.get("loads:#{key}").to_i, "#{be} round #{round}: loader calls across #{cmds.length} processes"
      end
      b.store.close
    end
  end

  # Ruby's fill is voided by a Go invalidation, and Go's by a Ruby one.
  def test_invalidation_voids_fills_across_languages
    each_cache do |be, addr, b, c|
      key = "void:#{be}:#{rand(1 << 30)}"
      loading = Queue.new
      invalidated = Queue.new
      t = Thread.new do
        c.fetch(key) do
          loading << true
          invalidated.pop # the Go invalidation lands while this load runs
          'stale'
        end
      end
      loading.pop
      _, err, st = Open3.capture3(node_helper, 'invalidate', addr, key)
      assert st.success?, err
      invalidated << true
      assert_equal 'stale', t.value
      assert_equal 1, c.stats[:lease_fills_lost], "#{be}: Ruby's fill after a Go invalidation"
      calls = 0
      assert_equal 'fresh', c.fetch(key) { calls += 1; 'fresh' }
      assert_equal 1, calls, "#{be}: the invalidated key loads again"

      key2 = "void2:#{be}:#{rand(1 << 30)}"
      go = Thread.new { Open3.capture3(node_helper, 'stampede', addr, key2, '1', '1500', 'stale') }
      # the Go loader counts its call first, then sleeps 1.5 s
      deadline = Time.now + 20
      sleep 0.01 until b.get("loads:#{key2}").to_i == 1 || Time.now > deadline
      c.invalidate(key2)
      out, err, st = go.value
      assert st.success?, err
      assert_equal 1, JSON.parse(out)['fillsLost'], "#{be}: Go's fill after a Ruby invalidation"
      assert_equal 'fresh2', c.fetch(key2) { 'fresh2' }
    end
  end

  # One process, many threads: one load per key, the rest wait on the lease.
  def test_threads_share_one_load
    each_cache do |be, _addr, _b, c|
      key = "threads:#{be}:#{rand(1 << 30)}"
      loads = Queue.new
      vals = Array.new(16) { Thread.new { c.fetch(key) { loads << 1; sleep 0.1; 'one' } } }.map(&:value)
      assert_equal ['one'] * 16, vals
      assert_equal 1, loads.size, be
    end
  end
end
