# frozen_string_literal: true

require_relative 'helper'
require 'kura/ring'
require 'dalli'
require 'redis'
require 'redis/distributed'

class TestRing < Minitest::Test
  def keys(n = 2000)
    rng = Random.new(3)
    Array.new(n) do |i|
      case i % 5
      when 0 then "user:#{i}"
      when 1 then "{tag#{i % 17}}:cart:#{i}"
      when 2 then "記事:#{rng.rand(1 << 30)}"
      when 3 then "k#{'x' * rng.rand(300)}#{i}"
      else "a\n{b#{i % 7}}c#{i}"
      end
    end
  end

  def servers(n)
    Array.new(n) { |i| "127.0.0.#{i + 1}:#{11_211 + i}" }
  end

  # Against dalli's own Dalli::Ring (its continuum lookup, without the
  # liveness check that would dial the servers).
  def test_dalli_agrees_with_dalli
    [1, 2, 3, 5, 8].each do |n|
      addrs = servers(n)
      weights = Array.new(n) { |i| (i % 3) + 1 }
      dservers = addrs.each_with_index.map { |a, i| Dalli::Protocol::Binary.new("#{a}:#{weights[i]}", {}) }
      dring = Dalli::Ring.new(dservers, {})
      ours = Kura::Ring::Dalli.new(addrs, weights: weights)
      keys.each do |k|
        next if k.bytesize > 250 # dalli's ring is handed the key after KeyManager

        theirs = n == 1 ? dservers[0] : dring.send(:server_for_hash_key, dring.send(:hash_for, k))
        assert_equal theirs.name, addrs[ours.index(k)], "n=#{n} key=#{k.inspect}"
      end
    end
  end

  # Against redis-rb's Redis::HashRing / Redis::Distributed#node_for.
  def test_distributed_agrees_with_redis_rb
    [1, 2, 3, 6].each do |n|
      urls = Array.new(n) { |i| "redis://127.0.0.1:#{6400 + i}/0" }
      dist = Redis::Distributed.new(urls)
      ours = Kura::Ring::Distributed.new(urls)
      keys.each do |k|
        assert_equal dist.node_for(k).id, urls[ours.index(k)], "n=#{n} key=#{k.inspect}"
      end
    end
  end

  # Against the Go rings (store/memcache's ketama, ring.Dalli, ring.Distributed), through rbinterop.
  def test_agrees_with_go
    bin = KuraTest.go_helper
    ks = keys(500)
    [1, 3, 7].each do |n|
      addrs = servers(n)
      urls = Array.new(n) { |i| "redis://127.0.0.1:#{6400 + i}/0" }
      weights = Array.new(n) { |i| (i % 3) + 1 }
      [['ketama', addrs, weights, Kura::Ring::Ketama.new(addrs, weights: weights)],
       ['dalli', addrs, weights, Kura::Ring::Dalli.new(addrs, weights: weights)],
       ['redis-rb', urls, [1] * n, Kura::Ring::Distributed.new(urls)]].each do |mode, ids, ws, ours|
        out = IO.popen([bin, 'ring', mode, ids.join(','), ws.join(',')], 'r+') do |io|
          io.write(JSON.generate(ks))
          io.close_write
          io.read
        end
        assert $?.success?, "rbinterop ring #{mode} failed"
        go = JSON.parse(out)
        ks.each_with_index { |k, i| assert_equal go[i], ids[ours.index(k)], "#{mode} n=#{n} #{k.inspect}" }
      end
    end
  end
end
