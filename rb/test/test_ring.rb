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

  # Against dalli's own Dalli::Ring, built on real server objects.
  def test_dalli_agrees_with_dalli
    [1, 2, 3, 5, 8].each do |n|
      addrs = servers(n)
      weights = Array.new(n) { |i| (i % 3) + 1 }
      dservers = addrs.each_with_index.map { |a, i| Dalli::Protocol::Binary.new("#{a}:#{weights[i]}", {}) }
      dring = Dalli::Ring.new(dservers, {})
      ours = Kura::Ring::Dalli.new(addrs, weights: weights)
      keys.each do |k|
        next if k.bytesize > 250 # dalli's ring is handed the key after KeyManager

        assert_equal dring.server_for_key(k).name, addrs[ours.index(k)], "n=#{n} key=#{k.inspect}"
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

  # Against the Go store's ring, through the Go interop helper.
  def test_ketama_agrees_with_go
    bin = KuraTest.go_helper
    [1, 3, 7].each do |n|
      addrs = servers(n)
      ks = keys(500)
      out = IO.popen([bin, 'ring', addrs.join(','), ([1] * n).join(',')], 'r+') do |io|
        io.write(JSON.generate(ks))
        io.close_write
        io.read
      end
      assert $?.success?, 'go ring helper failed'
      go = JSON.parse(out)
      ours = Kura::Ring::Ketama.new(addrs)
      ks.each_with_index { |k, i| assert_equal go[i], ours.server(k), k }
    end
  end
end
