# frozen_string_literal: true

require_relative 'helper'

# What an attacker or an unlucky caller does to the gem: odd keys, odd
# values, odd TTLs, hostile bytes, secrets in URLs. Each test fails
# without the fix it names.
class TestHardening < Minitest::Test
  def self.memcached
    @memcached ||= KuraTest::Servers.memcached
  end

  def cache(**o)
    addr = self.class.memcached&.first or skip 'memcached not installed'
    @store = Kura::MemcacheStore.new([addr], timeout: 5)
    Kura::Cache.new(@store, ttl: 60, **o)
  end

  def teardown
    @store&.close
  end

  # fetch(:sym) and fetch(42) returned nil: the value was looked up under
  # the caller's key, not its String form.
  def test_fetch_with_a_symbol_or_integer_key_returns_the_value
    c = cache
    tag = rand(1 << 30)
    assert_equal 1, c.fetch(:"sym#{tag}") { 1 }
    assert_equal 1, c.fetch(:"sym#{tag}") { flunk 'cached' }
    assert_equal 2, c.fetch(tag) { 2 }
    assert_equal 2, c.fetch(tag) { flunk 'cached' }
  end
end

class TestHardening
  # A block's value the codec cannot encode (an Integer past 64 bits
  # raised RangeError out of msgpack) is returned, not cached, not raised.
  def test_unencodable_values_are_returned_not_raised
    c = cache
    [2**70, -(2**70), Object.new].each do |v|
      k = "odd:#{rand(1 << 30)}"
      assert_equal v, c.fetch(k) { v }
      assert_nil c.read(k)
    end
  end
end
