# frozen_string_literal: true

require_relative 'helper'
require 'stringio'
require 'logger'
require 'timeout'

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

class TestHardening
  # A negative per-call TTL was sent as 0, which memcached and Redis read
  # as "no expiry": the value stayed forever. So did a TTL under 0.5 ms.
  # NaN raised FloatDomainError after the block ran.
  def test_per_call_ttls
    c = cache(ttl_jitter: 0)
    [-5, Float::NAN, Float::INFINITY, '60'].each do |t|
      e = assert_raises(ArgumentError) { c.fetch("ttl:#{rand(1 << 30)}", ttl: t) { 1 } }
      assert_match(/ttl must be a finite number/, e.message)
      assert_raises(ArgumentError) { c.write("ttl:#{rand(1 << 30)}", 1, ttl: t) }
      assert_raises(ArgumentError) { c.fetch("ttl:#{rand(1 << 30)}", negative_ttl: t) { nil } }
    end
    # the constructor's TTLs by the same rule: ttl: Infinity raised
    # FloatDomainError out of every fetch that wrote
    %i[ttl negative_ttl lease_ttl].each do |name|
      [-5, Float::NAN, Float::INFINITY, '60', nil].each do |t|
        e = assert_raises(ArgumentError) { Kura::Cache.new(@store, name => t) }
        assert_match(/#{name} must be a finite number/, e.message)
      end
    end
    k = "tiny:#{rand(1 << 30)}"
    assert_equal 1, c.fetch(k, ttl: 0.0001) { 1 }
    sleep 1.2
    assert_nil c.read(k), 'a TTL of 0.1 ms must expire, not live forever'
    k = "big:#{rand(1 << 30)}"
    assert_equal 1, c.fetch(k, ttl: 10**9) { 1 }
    assert_equal 1, c.read(k)
  end
end

class TestHardening
  # Planted Marshal bytes (the Rails store reads serializer 128 with
  # Marshal) escaped the codec as SystemStackError (deep nesting) or
  # NoMemoryError (a claimed count), which no `rescue` of a caller catches.
  def test_hostile_marshal_is_malformed
    c = Kura::Codec.new(compact: true, marshal_fallback: true, compressor: :none)
    [
      "\x04\x08".b + ("[\x06".b * 200_000) + '0'.b,   # nesting
      "\x04\x08[\x04\xff\xff\xff\x3f".b               # 2^30 elements claimed
    ].each do |payload|
      b = marshal_envelope(c, payload)
      e = assert_raises(Kura::MalformedError) { c.decode(b) }
      assert_equal :deserialize, e.code
    end
  end

  private

  # A serializer-128 envelope around payload, as a Ruby writer frames it.
  def marshal_envelope(codec, payload)
    real = Marshal.method(:dump)
    Marshal.singleton_class.send(:define_method, :dump) { |*_| payload }
    codec.encode(Object.new)
  ensure
    Marshal.singleton_class.send(:define_method, :dump, real)
  end
end

class TestHardening
  # '@' and '#' in a password, with a tail a parser that cuts at the first
  # '@' would keep ('evil'); what could parse as its host is localhost.
  SECRET = 's3cr3t#word@localhost#evil'

  # A password in a URL never appears in an exception message, #inspect or
  # a log line: URI's InvalidURIError quoted the whole URL (a '#' or a space
  # in a password makes it invalid), and Object#inspect printed @urls.
  def test_redis_url_secrets_stay_secret
    ["redis://:#{SECRET}@127.0.0.1:6379/0", "redis://user:#{SECRET.tr('#', ' ')}@127.0.0.1:6379/0",
     "redis://:#{SECRET}@/0"].each do |u|
      e = assert_raises(ArgumentError) { Kura::RedisStore.new(url: u) }
      refute_includes e.message, 's3cr3t'
      refute_includes e.message, 'evil'
      assert_match(/redis url/i, e.message)
    end
    enc = "redis://:#{URI.encode_www_form_component(SECRET)}@127.0.0.1:#{KuraTest::Servers.free_port}/0"
    log = StringIO.new
    s = Kura::RedisStore.new(urls: [enc, enc.sub('/0', '/1')], password: 'optsecret', timeout: 0.05, health: false)
    c = Kura::Cache.new(s, logger: Logger.new(log))
    assert_equal 1, c.fetch('k') { 1 }
    [s.inspect, c.inspect, log.string].each do |text|
      refute_match(/s3cr3t|optsecret/, text)
    end
  ensure
    s&.close
  end

  # A dalli-style memcached URL with credentials (the meta protocol has
  # none) was taken as the host name "memcached://u:pw@localhost": looked
  # up by DNS, and quoted, password and all, in every StoreError.
  def test_memcached_url_with_credentials_is_refused_without_echoing_it
    ["memcached://u:#{SECRET}@localhost:11211", "u:#{SECRET}@localhost:11211"].each do |addr|
      e = assert_raises(ArgumentError) { Kura::MemcacheStore.new([addr]) }
      refute_match(/s3cr3t|evil/, e.message)
    end
  end
end

class TestHardening
  # Only a StandardError from the block released its leases: after a
  # throw, Timeout.timeout or Thread#kill the lease stayed, and the next
  # fetch of the key (in any process) waited lease_wait and then loaded
  # without writing, for lease_ttl.
  def test_a_block_left_by_throw_timeout_or_kill_releases_its_lease
    c = cache(lease_wait: 2.0)
    exits = {
      throw: ->(k) { catch(:out) { c.fetch(k) { throw :out } } },
      timeout: ->(k) { Timeout.timeout(0.05) { c.fetch(k) { sleep 1 } } rescue Timeout::Error }, # rubocop:disable Style/RescueModifier
      kill: ->(k) { th = Thread.new { c.fetch(k) { sleep 5 } }; sleep 0.2; th.kill; th.join }
    }
    exits.each do |how, leave|
      k = "left:#{how}:#{rand(1 << 30)}"
      leave.call(k)
      t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      assert_equal 'v', c.fetch(k) { 'v' }
      took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
      assert_operator took, :<, 1.0, "#{how}: the next fetch waited #{took.round(2)} s on a lease nobody holds"
      assert_equal 'v', c.read(k), "#{how}: the next fetch's value was not written"
    end
  end
end

class TestHardening
  Point = Struct.new(:id, :name)
  KwPoint = Struct.new(:id, :name, keyword_init: true)
  # A reader's type (as:)
  class Row
    attr_reader :id

    def initialize(id:)
      @id = id
    end
  end

  # as: a plain Struct read {"id" => 1, "name" => "x"} as id = the whole
  # Hash and name = nil on Ruby 3.1 (keyword arguments to a positional
  # Struct); a class refusing a field another writer added made the value
  # a decode error, reloaded and overwritten for every reader.
  def test_as_maps_fields_by_name
    c = cache
    k = "as:#{rand(1 << 30)}"
    c.write(k, { 'id' => 1, 'name' => 'x', 'added_by_go' => true })
    assert_equal Point.new(1, 'x'), Kura::Cache.new(@store, as: Point).fetch(k) { flunk 'a hit' }
    assert_equal KwPoint.new(id: 1, name: 'x'), Kura::Cache.new(@store, as: KwPoint).fetch(k) { flunk 'a hit' }
    row = Kura::Cache.new(@store, as: Row).fetch(k) { flunk 'a hit' }
    assert_equal 1, row.id
    assert_equal({ 'id' => 1, 'name' => 'x', 'added_by_go' => true }, c.read(k))
  end
end

class TestHardening
  # The empty key (an id that was nil, "#{prefix}" + "") has no memcached
  # wire form: sent, it failed its whole server's batch, so every key on
  # that server went to the block on every call and was never cached.
  def test_the_empty_key_does_not_spoil_its_batch
    c = cache
    keys = Array.new(20) { |i| "ek:#{rand(1 << 30)}:#{i}" }
    asked = []
    2.times do
      got = c.fetch_multi('', *keys) { |m| asked << m.sort; m.to_h { |k| [k, "v#{k}"] } }
      assert_equal 21, got.length
      assert_equal 'v', got['']
    end
    assert_equal [([''] + keys).sort, ['']], asked
    assert_equal 'v', c.fetch('') { 'v' }
    refute c.write_multi({ '' => 1, keys[0] => 2 })
    assert_equal 2, c.read(keys[0])
    assert c.invalidate('', keys[0])
    assert_nil c.read(keys[0])
  end
end
