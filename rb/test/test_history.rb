# frozen_string_literal: true

require_relative 'helper'
require 'open3'
require_relative 'fixtures/backend'

# docs/leases.md's per-read guarantee with Ruby readers: 2 Ruby, 1 Go and
# 1 Node reader processes (4 loops each) fetch one key while this process bumps
# the source of truth and invalidates it (from Ruby, and every 4th time
# from a Go process). A read that started after an invalidation returned
# must return at least the version written before it. The control runs the
# Ruby readers with leases off: the check must then see stale reads.
class TestHistory < Minitest::Test
  def node_helper = KuraTest.node_interop

  def micros = Process.clock_gettime(Process::CLOCK_REALTIME, :microsecond)

  def history(addr, key, leases)
    b = KuraBackend.open(addr)
    set_src = ->(v) { b.store.is_a?(Kura::RedisStore) ? b.store.client(b.store.nodes[0]).set("src:#{key}", v.to_s) : nil }
    if b.store.is_a?(Kura::RedisStore)
      set_src.call(1)
    else
      b.incr("src:#{key}") # memcached: counters are ma; starts at 1
    end
    c = Kura::Cache.new(b.store, leases: leases != 'off')
    ruby = ['ruby', File.join(__dir__, 'fixtures', 'history_reader.rb'), addr, key, '4', '30000', leases]
    go = [node_helper, 'history', addr, key, '4', '30000', leases]
    node = ['node', File.join(KuraTest::ROOT, 'js', 'test', 'fixtures', 'history-reader.mjs'), addr, key, '4', '30000', leases]
    procs = [[ruby, 'ruby'], [ruby, 'ruby'], [go, 'go']]
    procs << [node, 'node'] if File.exist?(File.join(KuraTest::ROOT, 'js', 'dist', 'index.js'))
    readers = procs.map do |cmd, lang|
      Thread.new do
        out, err, st = Open3.capture3(*cmd)
        raise "#{lang} reader: #{err}" unless st.success?

        JSON.parse(out).map { |r| r + [lang] }
      end
    end
    deadline = Time.now + 30
    sleep 0.01 while b.get("ready:#{key}").to_i < procs.length && Time.now < deadline
    sleep 0.1
    invals = []
    start = Time.now
    i = 0
    while (Time.now - start < 1.0 || invals.length < 12) && Time.now - start < 15
      v = b.incr("src:#{key}")
      if (i % 4).zero?
        _, err, st = Open3.capture3(node_helper, 'invalidate', addr, key)
        raise err unless st.success?
      else
        c.invalidate(key)
      end
      invals << [micros, v.to_i]
      i += 1
      sleep 0.02 + (rand * 0.04)
    end
    if b.store.is_a?(Kura::RedisStore)
      b.store.client(b.store.nodes[0]).set("stop:#{key}", '1')
    else
      b.store.set_batch({ b.store.node_of("stop:#{key}") => [["stop:#{key}", '1', 60_000]] })
    end
    reads = readers.flat_map(&:value)
    b.store.close
    [reads, invals]
  end

  def violations(reads, invals)
    bad = []
    checked = Hash.new(0)
    reads.each do |start, fin, v, lang|
      need = invals.select { |t, _| t + 2000 < start }.map(&:last).max || 0
      checked[lang] += 1 if need.positive?
      bad << { lang: lang, start: start, end: fin, got: v, need: need } if v < need
    end
    [bad, checked]
  end

  def test_per_read_guarantee_with_ruby_readers
    m, = KuraTest::Servers.memcached
    r, = KuraTest::Servers.redis
    { 'redis' => r, 'memcached' => "memcache://#{m}" }.each do |be, addr|
      reads, invals = history(addr, "hist:#{be}:#{rand(1 << 30)}", 'auto')
      bad, checked = violations(reads, invals)
      assert_operator invals.length, :>=, 10
      assert_operator checked['ruby'], :>=, 50, "#{be}: #{checked}"
      assert_operator checked['go'], :>=, 20, "#{be}: #{checked}"
      assert_equal [], bad.first(5), "#{be}: #{bad.length} stale reads of #{checked.values.sum}"
      $stderr.puts "#{be}: leases: 0 stale of #{checked.values.sum} reads (#{checked}) after #{invals.length} invalidations" if ENV['KURA_VERBOSE']
      next unless be == 'redis'

      # The injected fault: Ruby readers without leases (a fill that began
      # before an invalidation lands after it). The check must see it.
      reads, invals = history(addr, "hist:off:#{rand(1 << 30)}", 'off')
      bad, checked = violations(reads, invals)
      refute_empty bad, "the control (leases off) shows stale reads: the check can see them (#{checked})"
      $stderr.puts "#{be}: leases off (control): #{bad.length} stale of #{checked.values.sum}" if ENV['KURA_VERBOSE']
    end
  end
end
