# frozen_string_literal: true

require_relative 'helper'
require 'redis/distributed'

# Redis beyond one server: shards placed as Redis::Distributed places them,
# and a Redis Cluster (3 masters, started here), read back through
# redis-rb's own clients.
class TestRedisTopologies < Minitest::Test
  def cluster(password: nil)
    KuraTest::Servers.need('redis-server') or skip 'no redis-server'
    auth = password ? ['--requirepass', password, '--masterauth', password] : []
    cli = password ? ['-a', password, '--no-auth-warning'] : []
    ports = Array.new(3) { KuraTest::Servers.free_port }
    dir = Dir.mktmpdir('kura-cluster')
    ports.each do |p|
      pid = Process.spawn('redis-server', '--bind', '127.0.0.1', '--port', p.to_s, '--cluster-enabled', 'yes',
                          '--cluster-config-file', "#{dir}/nodes-#{p}.conf", '--save', '', '--appendonly', 'no',
                          *auth, chdir: dir, out: File::NULL, err: File::NULL)
      KuraTest::Servers.track(pid)
      KuraTest::Servers.wait_port(p)
    end
    seeds = ports.map { |p| "127.0.0.1:#{p}" }
    out, st = Open3.capture2e('redis-cli', *cli, '--cluster', 'create', *seeds, '--cluster-replicas', '0', '--cluster-yes')
    assert st.success?, out
    deadline = Time.now + 20
    until Time.now > deadline
      ok = ports.all? { |p| Open3.capture2('redis-cli', *cli, '-p', p.to_s, 'cluster', 'info')[0].include?('cluster_state:ok') }
      break if ok

      sleep 0.1
    end
    seeds
  end

  def test_cluster
    seeds = cluster
    # slots as the server computes them (CLUSTER KEYSLOT), tags included
    node = Redis.new(url: "redis://#{seeds[0]}")
    (Array.new(300) { |i| i.even? ? "user:#{i}" : "{tag#{i % 13}}x#{i}" } + ['{}a', 'a{}b', '{x', '}{y}', 'a{b}{c}']).each do |k|
      assert_equal node.call(['CLUSTER', 'KEYSLOT', k]), Kura::RedisStore.slot(k), k
    end
    node.close
    s = Kura::RedisStore.new(cluster: seeds, timeout: 2)
    assert_equal 3, s.nodes.length
    c = Kura::Cache.new(s, ttl: 60)
    keys = Array.new(300) { |i| "cl:#{i}" }
    calls = 0
    got = c.fetch_multi(*keys) { |m| calls += 1; m.to_h { |k| [k, { 'k' => k }] } }
    assert_equal 1, calls
    assert_equal 300, got.length
    rc = Redis.new(cluster: seeds.map { |a| "redis://#{a}" })
    codec = Kura::Codec.new
    keys.each { |k| assert_equal({ 'k' => k }, codec.decode(rc.get(k)).value) }
    assert_equal 300, c.fetch_multi(*keys) { raise 'warm' }.length
    vals = Array.new(8) { Thread.new { c.fetch('cl:stampede') { calls += 1; sleep 0.1; 'one' } } }.map(&:value)
    assert_equal ['one'] * 8, vals
    assert_equal 2, calls, 'one load for the stampede'
    c.invalidate(*keys)
    assert_nil rc.get(keys[0])
    rc.close
    s.close
  end

  # A password in the seed URLs was dropped: the slot map and the masters
  # were opened from "host:port", so the store could not start (NOAUTH).
  def test_cluster_with_a_password_in_the_seed_urls
    pw = 's3cr#t pw'
    seeds = cluster(password: pw)
    s = Kura::RedisStore.new(cluster: seeds.map { |a| "redis://:#{URI.encode_www_form_component(pw).gsub('+', '%20')}@#{a}" }, timeout: 2)
    refute_includes s.inspect, 's3cr'
    c = Kura::Cache.new(s, ttl: 60)
    keys = Array.new(30) { |i| "pw:#{i}" }
    assert_equal 30, c.fetch_multi(*keys) { |m| m.to_h { |k| [k, k] } }.length
    assert_equal 30, c.fetch_multi(*keys) { raise 'warm' }.length
    assert_equal 0, c.stats[:store_errors]
    s.close
  end

  def test_distributed_shards
    urls = Array.new(2) { "redis://#{KuraTest::Servers.redis[0]}/0" }
    s = Kura::RedisStore.new(urls: urls, timeout: 5)
    c = Kura::Cache.new(s, ttl: 60)
    keys = Array.new(200) { |i| "sh:#{i}" }
    c.fetch_multi(*keys) { |m| m.to_h { |k| [k, k] } }
    dist = Redis::Distributed.new(urls)
    codec = Kura::Codec.new
    keys.each { |k| assert_equal k, codec.decode(dist.get(k)).value, k }
    per = urls.map { |u| Redis.new(url: u).dbsize }
    assert per.all?(&:positive?), per.inspect
  end
end
require 'tmpdir'
require 'open3'
