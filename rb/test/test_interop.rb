# frozen_string_literal: true

require_relative 'helper'
require 'time'
require 'open3'

# Go -> Ruby, Ruby -> Go, Node -> Ruby and Ruby -> Node, for every value
# kind, envelope version and compressor, with records read by field name
# (the seed's user-item row as a Go struct with tags, a Node object, a
# Ruby Hash / Struct / ActiveRecord-like object), on Redis and memcached.
class TestInterop < Minitest::Test
  AT = Time.utc(2026, 11, 24, 22, 0, Rational(123, 1000))
  ITEM = { 'id' => 90_210, 'user_id' => 42, 'name' => '記事 ruby item', 'tags' => %w[金利 yen], 'qty' => 3,
           'price' => 12.5, 'active' => true, 'acquired' => AT }.freeze
  BIG = ITEM.merge('name' => ITEM['name'] + (' the yen weakened as the central bank held rates' * 20)).freeze
  ItemStruct = Struct.new(:id, :user_id, :name, :tags, :qty, :price, :active, :acquired, keyword_init: true)

  # What ActiveRecord hands out: an object with #attributes.
  class FakeRecord
    def initialize(attrs)
      @attrs = attrs
    end

    def attributes
      @attrs
    end
  end

  def self.servers
    @servers ||= begin
      m1, = KuraTest::Servers.memcached
      m2, = KuraTest::Servers.memcached
      r, = KuraTest::Servers.redis
      { 'memcached' => ["memcache://#{m1},#{m2}", Kura::MemcacheStore.new([m1, m2], timeout: 2)],
        'redis' => [r, Kura::RedisStore.new(url: "redis://#{r}", timeout: 2)] }
    end
  end

  # Runs a helper; once more if it reported a store error (a store call
  # that outlived its budget on an overloaded machine), never to hide a
  # wrong value.
  def run_json(*cmd)
    2.times do |try|
      out, err, st = Open3.capture3(*cmd)
      assert st.success?, "#{cmd.join(' ')}: #{err}" if try == 1
      next unless st.success?

      got = JSON.parse(out)
      timed_out = got.values.any? { |v| v.is_a?(Hash) && v['error'].to_s.match?(/took longer|timeout|deadline|i\/o timeout/i) }
      return got if try == 1 || !timed_out
    end
  end

  def node_bin
    dist = File.join(KuraTest::ROOT, 'js', 'dist', 'index.js')
    unless File.exist?(dist)
      raise 'js/dist missing: run make test-node (or cd js && npm ci) first' if ENV['KURA_REQUIRE_SERVERS'] == '1'

      skip 'js/dist not built'
    end
    ['node', File.join(__dir__, 'fixtures', 'node_values.mjs')]
  end

  def codecs
    { 'item' => Kura::Codec.new(compact: true), 'item-v2' => Kura::Codec.new, 'item-jsontags' => Kura::Codec.new(compact: true),
      'item-s2' => Kura::Codec.new, 'item-json' => Kura::Codec.new(serializer: :json),
      'item-zstd' => Kura::Codec.new(compressor: :zstd, min_compress_size: -1), 'items' => Kura::Codec.new,
      'string' => Kura::Codec.new(compact: true), 'string-v2' => Kura::Codec.new,
      'map-v2' => Kura::Codec.new, 'int' => Kura::Codec.new, 'float' => Kura::Codec.new,
      'bool' => Kura::Codec.new, 'list' => Kura::Codec.new, 'map' => Kura::Codec.new, 'time' => Kura::Codec.new,
      'raw' => Kura::Codec.new(serializer: :raw), 'idlist' => Kura::Codec.new(serializer: :idlist) }
  end

  def ruby_values
    { 'item' => FakeRecord.new(ITEM.dup), 'item-v2' => ITEM.transform_keys(&:to_sym),
      'item-jsontags' => ItemStruct.new(**ITEM.transform_keys(&:to_sym)),
      'item-s2' => ItemStruct.new(**BIG.transform_keys(&:to_sym)),
      'item-json' => BIG, 'item-zstd' => BIG, 'items' => [ITEM, ITEM],
      'string' => 'héllo, 世界', 'string-v2' => 'user:42 logged in', 'map-v2' => { 'a' => 1, b: 2 },
      'int' => -1_234_567_890_123, 'float' => 3.25, 'bool' => true, 'list' => [1, 2, 3], 'map' => { b: 2, 'a' => 1 },
      'time' => AT, 'raw' => "raw bytes \x00\x01\x02".b, 'idlist' => [1, 2, 3, 100, 7, -5] }
  end

  # Go's JSON of a value read back, in Ruby terms.
  def go_json(name, v)
    case name
    when 'item', 'item-v2', 'item-jsontags', 'item-s2', 'item-json', 'item-zstd' then v.merge('acquired' => Time.parse(v['acquired']))
    when 'items' then v.map { |x| x.merge('acquired' => Time.parse(x['acquired'])) }
    when 'time' then Time.parse(v)
    when 'raw' then [v['bytes']].pack('H*')
    else v
    end
  end

  def expect(name)
    case name
    when 'item', 'item-v2', 'item-jsontags', 'item-zstd', 'item-s2' then %w[item item-v2 item-jsontags].include?(name) ? ITEM : BIG
    when 'item-json' then BIG.merge('acquired' => '2026-11-24T22:00:00.123Z')
    when 'items' then [ITEM, ITEM]
    when 'map-v2', 'map' then { 'a' => 1, 'b' => 2 }
    else ruby_values[name]
    end
  end

  def each_backend
    self.class.servers.each { |name, (addr, store)| yield name, addr, store }
  end

  def test_go_to_ruby
    each_backend do |be, addr, store|
      prefix = "g2r:#{rand(1 << 30)}:"
      wrote = run_json(KuraTest.go_helper, 'write', addr, prefix)
      refute wrote.values.any? { |v| v.is_a?(Hash) && v['error'] }, wrote.inspect
      seen = []
      codecs.each do |name, c|
        key = prefix + name
        raw = store.get_batch({ store.node_of(key) => [key] }).values.first.first
        refute_nil raw, "#{be} #{key} absent"
        got = c.decode(raw)
        seen << [got.version, got.compressor]
        want = name == 'item-json' ? BIG.merge('acquired' => '2026-11-24T22:00:00.123Z') : expect(name)
        want = want.b if name == 'raw'
        assert_equal want, got.value, "#{be} Go -> Ruby #{name}"
      end
      assert_equal [2, 3], seen.map(&:first).uniq.sort, 'Go wrote both envelope versions'
      assert_equal [0, 1, 2], seen.map(&:last).uniq.sort, 'Go wrote stored, Snappy and zstd payloads'
      neg = Kura::Codec.new.decode(store.get_batch({ store.node_of("#{prefix}negative") => ["#{prefix}negative"] }).values.first.first)
      assert_equal :negative, neg.kind
    end
  end

  def test_ruby_to_go
    each_backend do |be, addr, store|
      prefix = "r2g:#{rand(1 << 30)}:"
      cs = codecs
      ruby_values.each do |name, v|
        c = Kura::Cache.new(store, codec: cs[name])
        assert c.write("#{prefix}#{name}", v, ttl: 60), "#{be} write #{name}"
      end
      Kura::Cache.new(store).write("#{prefix}negative", nil, ttl: 60)
      got = run_json(KuraTest.go_helper, 'read', addr, prefix)
      ruby_values.each_key do |name|
        v = got["#{prefix}#{name}"]
        refute v.is_a?(Hash) && v.keys == ['error'], "#{be} Ruby -> Go #{name}: #{v.inspect}"
        want = expect(name)
        want = BIG if name == 'item-json'
        assert_equal want, go_json(name, v), "#{be} Ruby -> Go #{name}"
      end
      assert_equal 'not found', got["#{prefix}negative"]
    end
  end

  def test_node_to_ruby_and_back
    node = node_bin
    each_backend do |be, addr, store|
      prefix = "n2r:#{rand(1 << 30)}:"
      wrote = run_json(*node, 'write', addr, prefix)
      c = Kura::Codec.new
      compressors = []
      wrote.each do |key, want|
        raw = store.get_batch({ store.node_of(key) => [key] }).values.first.first
        refute_nil raw, "#{be} #{key}"
        e = c.decode(raw)
        compressors << e.compressor
        v = e.value
        v = v.merge('acquired' => v['acquired'].utc.iso8601(3).sub('+00:00', 'Z')) if v.is_a?(Hash) && v['acquired'].is_a?(Time)
        want = want.merge('acquired' => want['acquired'].sub(/\.(\d{3})Z/, '.\1Z')) if want.is_a?(Hash) && want['acquired']
        assert_equal want, v, "#{be} Node -> Ruby #{key}"
      end
      assert_equal [0, 1, 2], compressors.uniq.sort, 'Node wrote stored, Snappy and zstd payloads'
      # Ruby -> Node: Ruby writes the same keys with its own codecs.
      prefix2 = "r2n:#{rand(1 << 30)}:"
      rv = { 'item' => [Kura::Codec.new, FakeRecord.new(ITEM.dup)], 'item-s2' => [Kura::Codec.new, BIG],
             'item-zstd' => [Kura::Codec.new(compressor: :zstd, min_compress_size: -1), ItemStruct.new(**BIG.transform_keys(&:to_sym))],
             'item-json' => [Kura::Codec.new(serializer: :json), BIG],
             'item-compact' => [Kura::Codec.new(compact: true), ITEM],
             'string' => [Kura::Codec.new, 'héllo, 世界'], 'string-compact' => [Kura::Codec.new(compact: true), 'user:42 logged in'],
             'int' => [Kura::Codec.new, -1_234_567_890_123], 'float' => [Kura::Codec.new, 3.25], 'bool' => [Kura::Codec.new, true],
             'list' => [Kura::Codec.new, [1, 2, 3]], 'map' => [Kura::Codec.new, { b: 2, a: 1 }] }
      rv.each { |name, (cd, v)| assert Kura::Cache.new(store, codec: cd).write(prefix2 + name, v, ttl: 60) }
      got = run_json(*node, 'read', addr, prefix2)
      rv.each do |name, (_, v)|
        g = got[prefix2 + name]
        want = JSON.parse(JSON.generate(Kura::Codec.to_wire(v, json: true)))
        want['acquired'] = '2026-11-24T22:00:00.123Z' if want.is_a?(Hash) && want['acquired']
        assert_equal want, g, "#{be} Ruby -> Node #{name}"
      end
    end
  end
end

# Dictionaries a Go fleet publishes with dictstore (zstd and S2 formats):
# a Ruby cache without them fetches them where Go publishes them, checks
# them by content id and digest, and reads the values.
class TestPublishedDictionaries < Minitest::Test
  def test_reads_go_values_with_published_dictionaries
    r, = KuraTest::Servers.redis
    prefix = "dict:#{rand(1 << 30)}:"
    out, err, st = Open3.capture3(KuraTest.node_interop, 'dictwrite', r, prefix)
    assert st.success?, err
    want = JSON.parse(out)
    store = Kura::RedisStore.new(url: "redis://#{r}", timeout: 5)
    c = Kura::Cache.new(store)
    got = c.read_multi(*want.keys)
    want.each do |k, v|
      refute_nil got[k], "#{k}: #{c.stats.inspect}"
      assert_equal v.merge('at' => Time.parse(v['at'])), got[k], k
    end
    raw = store.get_batch({ store.node_of(want.keys[0]) => want.keys }).values.first
    assert_equal [2, 3], raw.map { |b| c.codec.decode(b).compressor }.sort, 'zstd and s2-dict'
    # a forged dictionary under the id (another digest) is refused: a miss left in place
    id = c.codec.decode(raw[0]).dict
    store.client(store.nodes[0]).set(format('kura:dict:%08x', id), 'forged' * 100)
    fresh = Kura::Cache.new(store)
    assert_nil fresh.read(want.keys[0])
    assert_equal 1, fresh.stats[:not_understood]
    store.close
  end
end
