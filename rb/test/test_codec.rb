# frozen_string_literal: true

require_relative 'helper'

class TestCodecVectors < Minitest::Test
  VEC = JSON.parse(File.read(KuraTest.testdata('format', 'vectors.json')))

  def codec_for(v)
    o = v['options'] || {}
    dicts = {}
    dicts[o['dictionary']] = KuraTest.hex(o['dictionary_hex']) if o['dictionary']
    Kura::Codec.new(dictionaries: dicts)
  end

  # The value a vector's input decodes to, in Ruby's form.
  def expected(v, entry)
    case v['kind']
    when 'negative', 'lease', 'tombstone' then nil
    when 'bytes' then KuraTest.hex(v['value'])
    when 'record'
      r = v['value']
      entry.serializer == 6 ? r.values : r
    else entry.serializer == 3 ? v['value'].b : v['value']
    end
  end

  def check_vector(v)
    e = codec_for(v).decode(KuraTest.hex(v['hex']))
    assert_equal v['kind'] == 'record' || %w[string bytes].include?(v['kind']) ? :value : v['kind'].to_sym, e.kind, v['name']
    want = expected(v, e)
    if want.nil?
      assert_nil e.value, v['name']
    else
      assert_equal want, e.value, v['name']
    end
    f = v['fields']
    if f['HasSchema'] && e.serializer != 5
      assert_equal f['Schema'], e.schema, v['name']
    end
    assert_equal [f['Token']].pack('A*'), e.token.to_s, v['name'] unless f['Token'].empty?
    return if f['Written'].start_with?('0001')

    assert_equal (Time.parse(f['Written']).to_r * 1000).to_i, e.written, v['name']
  end

  def test_vectors
    require 'time'
    (VEC['vectors'] + VEC['version1'] + VEC['pre_digest']).each { |v| check_vector(v) }
  end

  def test_every_version_kind_and_compressor_is_covered
    seen = (VEC['vectors'] + VEC['version1']).map do |v|
      e = codec_for(v).decode(KuraTest.hex(v['hex']))
      [e.version, e.kind, e.compressor]
    end
    assert_equal [1, 2, 3], seen.map(&:first).uniq.sort
    assert_equal %i[lease negative tombstone value], seen.map { _2 }.uniq.sort
    assert_equal [0, 1, 2, 3], seen.map(&:last).compact.uniq.sort
  end

  def test_forged_dictionary
    f = VEC['forged_dictionary'].first
    real = Kura::Codec.new(dictionaries: { f['dictionary'] => KuraTest.hex(f['real_dictionary_hex']) })
    forged = Kura::Codec.new(dictionaries: { f['dictionary'] => KuraTest.hex(f['forged_dictionary_hex']) })
    assert_equal f['value'], real.decode(KuraTest.hex(f['hex'])).value
    err = assert_raises(Kura::MalformedError) { forged.decode(KuraTest.hex(f['hex'])) }
    assert_equal :unknown_dictionary, err.code
    assert_equal f['forged_value'], forged.decode(KuraTest.hex(f['pre_digest_hex'])).value
  end

  def test_malformed
    c = Kura::Codec.new
    VEC['malformed'].each do |m|
      err = assert_raises(Kura::MalformedError, m['name']) { c.decode(KuraTest.hex(m['hex'])) }
      assert_equal KuraTest::GO_ERRORS.fetch(m['error']), err.code, "#{m['name']}: #{err.message}"
    end
  end

  def test_not_understood
    c = Kura::Codec.new
    VEC['not_understood'].each do |m|
      assert_raises(Kura::NotUnderstoodError, m['name']) { c.decode(KuraTest.hex(m['hex'])) }
    end
  end

  def test_hostile_inputs_bounded
    c = Kura::Codec.new
    files = Dir[KuraTest.testdata('hostile', '*.hex')]
    refute_empty files
    files.each do |path|
      bytes = KuraTest.hex(File.readlines(path).reject { |l| l.start_with?('#') }.join)
      before = GC.stat(:total_allocated_objects)
      rss0 = rss_kb
      begin
        e = c.decode(bytes)
        assert File.basename(path).start_with?('honest'), "#{path} decoded: #{e.value.inspect[0, 80]}"
      rescue Kura::MalformedError, Kura::NotUnderstoodError => err
        refute File.basename(path).start_with?('honest'), "#{path}: #{err.message}"
      end
      # Bounded: a few hundred objects and no RSS jump over 16 MiB for bytes under 200.
      assert_operator GC.stat(:total_allocated_objects) - before, :<, 100_000, path
      assert_operator rss_kb - rss0, :<, 16 << 10, path
    end
  end

  def rss_kb
    File.read('/proc/self/status')[/VmRSS:\s+(\d+)/, 1].to_i
  end

  def test_round_trips
    rec = { 'id' => 42, 'name' => '記事 article', 'tags' => %w[金利 yen], 'body' => 'The yen weakened. ' * 30 }
    [{}, { compressor: :zstd }, { compressor: :none }, { compact: true }, { compact: true, compressor: :zstd },
     { serializer: :json }, { serializer: :json, compact: true }].each do |o|
      c = Kura::Codec.new(**o)
      assert_equal rec, c.decode(c.encode(rec, schema: 0x12345678, written: 1_790_000_000_000)).value, o.inspect
      assert_equal 'user:42 logged in', c.decode(c.encode('user:42 logged in')).value, o.inspect
    end
    ids = Kura::Codec.new(serializer: :idlist)
    assert_equal [5, 3, 1_000_000, -7, 0], ids.decode(ids.encode([5, 3, 1_000_000, -7, 0])).value
    raw = Kura::Codec.new(serializer: :raw)
    assert_equal "\x00\xff".b, raw.decode(raw.encode("\x00\xff".b)).value
    t = Time.at(1_790_000_000, 123_000_000, :nsec)
    assert_equal t, Kura::Codec.new.decode(Kura::Codec.new.encode({ 'at' => t })).value['at']
  end

  def test_compact_string_is_25_bytes
    c = Kura::Codec.new(compact: true)
    b = c.encode('user:42 logged in', schema: 0x6d1d8c1b, written: (Time.utc(2026, 11, 18, 11, 6, 40).to_i * 1000))
    assert_equal 'c14b0325c09b9f0d757365723a3432206c6f6767656420696e', b.unpack1('H*')
  end

  def test_exact_v2_vectors_encode_identically
    VEC['vectors'].each do |v|
      next unless v['exact_payload'] && v['kind'] == 'string' && v['options']['serializer'] == 'msgpack' && !v['options']['compact']
      next unless v['fields']['Written'].start_with?('0001')

      assert_equal v['hex'], Kura::Codec.new.encode(v['value']).unpack1('H*'), v['name']
    end
    assert_equal 'c14b020100', Kura::Codec.new.encode_negative.unpack1('H*')
  end

  # A fuzz-ish pass: every vector mutated (byte flips, truncations,
  # insertions) never raises anything but the two error classes.
  def test_mutations_never_crash
    rng = Random.new(Integer(ENV.fetch('KURA_FUZZ_SEED', 7)))
    iters = Integer(ENV.fetch('KURA_FUZZ_ITERS', 4000))
    seeds = (VEC['vectors'] + VEC['version1']).map { |v| [codec_for(v), KuraTest.hex(v['hex'])] }
    iters.times do
      c, b = seeds[rng.rand(seeds.length)]
      b = b.dup
      rng.rand(1..4).times do
        case rng.rand(4)
        when 0 then b.setbyte(rng.rand(b.bytesize), rng.rand(256)) unless b.empty?
        when 1 then b = b.byteslice(0, rng.rand(b.bytesize + 1))
        when 2 then b.insert(rng.rand(b.bytesize + 1), rng.rand(256).chr)
        when 3 then b.insert(rng.rand(b.bytesize + 1), ["\xdd\xff\xff\xff\xff", "\xdf\x7f\xff\xff\xff", "\xc6\xff\xff\xff\x00"].sample(random: rng).b)
        end
      end
      begin
        c.decode(b)
      rescue Kura::MalformedError, Kura::NotUnderstoodError
        nil
      end
    end
    pass
  end

  # The batch fast paths (a Time packer of our own, the shape's key order
  # by slice, the shared header) write the bytes the general path writes.
  def test_fast_paths_write_the_same_bytes
    ref = MessagePack::Factory.new
    ref.register_type(-1, ::Time, packer: MessagePack::Time::Packer, unpacker: MessagePack::Time::Unpacker)
    [Time.at(0), Time.at(1_700_000_000), Time.at(0xFFFF_FFFF), Time.at(0x1_0000_0000), Time.at(-1),
     Time.at(1_700_000_000, 123_456_789, :nsec), Time.at(1 << 35), Time.at(-(1 << 40), 5, :nsec)].each do |t|
      assert_equal ref.dump(t), Kura::Codec.send(:const_get, :FACTORY).dump(t), t.inspect
      assert_equal t, Kura::Codec.send(:const_get, :FACTORY).load(Kura::Codec.send(:const_get, :FACTORY).dump(t))
    end
    c = Kura::Codec.new(compact: true)
    rec = { 'id' => 7, 'b' => true, 'a' => 'x', 'at' => Time.at(1_800_000_000).utc, 'f' => 1.5, 'n' => nil }
    slow = { 'a' => 'x', 'at' => Time.at(1_800_000_000).utc, 'b' => true, 'f' => 1.5, 'id' => 7, 'n' => nil }
    assert_equal ref.dump(slow), ref.dump(Kura::Codec.to_wire(rec))
    nested = rec.merge('h' => { 'z' => 1, 'y' => :s }, 'l' => [{ 'k' => 1, 'j' => 2 }])
    assert_equal %w[j k], Kura::Codec.to_wire(nested)['l'][0].keys
    assert_equal({ 'y' => 's', 'z' => 1 }, Kura::Codec.to_wire(nested)['h'])
    w = 1_790_000_000_000
    one = c.encode(rec, written: w)
    assert_equal one, c.encode(rec, written: w)
    assert_equal one, Kura::Codec.new(compact: true).encode(rec, written: w)
    refute_equal one, c.encode(rec, written: w + 5000)
    assert_equal rec['id'], c.decode(c.encode(rec, written: w)).value['id']
    assert_equal Kura::Codec.new(compact: true).encode(rec, written: w, schema: 9), c.encode(rec, written: w, schema: 9)
  end

  # The key-order memo is bounded: a Hash past MEMO_KEYS keys is sorted,
  # not kept, and a stream of new shapes never holds more than 1,024.
  def test_key_order_memo_is_bounded
    memo = Kura::Codec.instance_variable_get(:@key_orders)
    big = Array.new(10_000) { |i| ["k#{i}", i] }.to_h
    assert_equal big.keys.sort, Kura::Codec.to_wire(big).keys
    refute memo.key?(big.keys), 'a 10,000-key shape is not memoized'
    2_000.times { |i| Kura::Codec.to_wire({ "shape#{i}" => 1, 'a' => 2 }) }
    assert_operator memo.size, :<=, 1024
    assert_equal %w[a shape1999], Kura::Codec.to_wire({ 'shape1999' => 1, 'a' => 2 }).keys
  end

  # The thread's packer is reused for small values, and dropped after a
  # large one: Packer#clear keeps its buffer, so a thread that once wrote
  # 100 MB held 100 MB until it ended.
  def test_the_threads_packer_does_not_keep_a_large_buffer
    Thread.new do
      c = Kura::Codec.new(compressor: :none)
      c.encode({ 'a' => 1 })
      pk = Thread.current[:kura_packer]
      refute_nil pk
      c.encode({ 'b' => 2 })
      assert_same pk, Thread.current[:kura_packer]
      assert_equal 'x' * (2 << 20), c.decode(c.encode('x' * (2 << 20))).value
      assert_nil Thread.current[:kura_packer], 'a packer that wrote 2 MiB is not kept'
      assert_equal({ 'c' => 3 }, c.decode(c.encode({ 'c' => 3 })).value)
    end.join
  end
end
