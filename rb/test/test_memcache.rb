# frozen_string_literal: true

require_relative 'helper'
require 'open3'

# The meta-protocol client: key forms identical to Go's, and a response
# parser that turns any bytes into an answer or a StoreError.
class TestMemcache < Minitest::Test
  def test_wire_keys_agree_with_go
    keys = ['user:42', 'a b', "tab\tkey", "nul\x00key", 'x' * 250, 'x' * 251, 'é' * 93, 'é' * 94,
            "\x00#{'y' * 10}", '記事:1', 'k' * 5000, "del\x7f", '{tag}:1']
    out, err, st = Open3.capture3(KuraTest.node_interop, 'wirekeys', stdin_data: JSON.generate(keys))
    assert st.success?, err
    go = JSON.parse(out)
    keys.each_with_index do |k, i|
      tok, b64 = Kura::Memcache.wire_key(k)
      assert_equal go[i].b, (b64 ? "#{tok} b" : tok).b, k.inspect
    end
  end

  # Random and mutated answers on a socket: the parser returns answers or
  # raises StoreError (the connection dropped), never anything else.
  def test_parser_never_crashes
    rng = Random.new(5)
    good = ["VA 3 c12 W O1\r\nabc\r\n", "HD O2\r\n", "EN\r\n", "MN\r\n", "SERVER_ERROR out of memory\r\n", "NS O1\r\n",
            "VA 0 Z O1\r\n\r\n"]
    400.times do
      bytes = Array.new(rng.rand(1..6)) { good.sample(random: rng) }.join.b
      rng.rand(0..3).times do
        next if bytes.empty?

        case rng.rand(3)
        when 0 then bytes.setbyte(rng.rand(bytes.bytesize), rng.rand(256))
        when 1 then bytes = bytes.byteslice(0, rng.rand(bytes.bytesize))
        else bytes.insert(rng.rand(bytes.bytesize), ['VA 99999999999 ', "\n", 'O4294967296 ', 'x' * 9000].sample(random: rng))
        end
      end
      a, b = UNIXSocket.pair
      b.write(bytes)
      b.close
      conn = Kura::Memcache::Connection.new('127.0.0.1:1', read_timeout: 0.2)
      conn.instance_variable_set(:@sock, a)
      begin
        conn.finish(rng.rand(1..3), rng.rand(2).zero?, Process.clock_gettime(Process::CLOCK_MONOTONIC) + 0.2)
      rescue Kura::StoreError
        nil
      end
      conn.close
    end
    pass
  end
end
