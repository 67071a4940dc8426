# frozen_string_literal: true

require 'msgpack'
require 'json'
require 'digest'
require_relative 'errors'
require_relative 'varint'
require_relative 'native'
require_relative 's2'

module Kura
  # One decoded entry (docs/FORMAT.md): kind is :value, :negative, :lease
  # or :tombstone; written is Unix milliseconds, ttl milliseconds, cost
  # microseconds (nil when the entry does not carry them).
  Entry = Struct.new(:kind, :value, :version, :serializer, :compressor, :dict, :schema,
                     :written, :ttl, :cost, :token, :digest) do
    # Entry.of(kind, version): the rest is filled in as the header is read.
    def self.of(kind, version)
      new(kind, nil, version)
    end
  end

  # The kura envelope (docs/FORMAT.md), versions 1, 2 and 3, over
  # msgpack-ruby, libsnappy and libzstd. A Codec is safe to share between
  # threads: its settings do not change after construction, and its one
  # memo (the last compact header it built) is replaced whole.
  #
  #   codec = Kura::Codec.new                       # msgpack, Snappy above 256 B, version 2
  #   bytes = codec.encode({ 'id' => 1, 'name' => 'lamp' })
  #   codec.decode(bytes).value                     # => {"id"=>1, "name"=>"lamp"}
  #
  # Values map to what Go and Node read by one rule (docs/ruby.md "Values"):
  # a Hash is a msgpack map (String or Symbol keys, written as strings in
  # UTF-8 byte order, as Go and Node write maps), a Struct or an object
  # with #attributes (ActiveRecord, ActiveModel) is a map of its field
  # names as they are spelled (the names a Go json/msgpack tag or a Node
  # object key spells), Time is the msgpack timestamp extension (Go's
  # time.Time), Symbol a String.
  class Codec
    MAGIC = "\xC1K".b.freeze
    SERIALIZERS = { msgpack: 1, json: 2, raw: 3, idlist: 4, string: 5, msgpack_array: 6 }.freeze
    COMPRESSORS = { none: 0, s2: 1, snappy: 1, zstd: 2, s2_dict: 3 }.freeze
    KINDS = %i[value negative lease tombstone].freeze
    MAX_FIELDS_LEN = 4096
    MAX_DECODED_SIZE = 64 << 20
    RATIO_FLOOR = 1 << 20
    MAX_RATIO = 256
    DEFAULT_MIN_COMPRESS_SIZE = 256
    DEFAULT_MIN_SAVINGS = 0.1
    COMPACT_EPOCH = 1_767_225_600 # 2026-01-01T00:00:00Z
    NEGATIVE = "\xC1K\x02\x01\x00".b.freeze
    MARSHAL_ID = 128

    # The timestamp extension's bytes, as MessagePack::Time::Packer writes
    # them; a whole second in 32 bits (every record's created_at) without
    # the Timestamp object and its branches.
    TIME_PACKER = lambda do |t|
      sec = t.tv_sec
      nsec = t.tv_nsec
      if nsec.zero? && sec >= 0 && sec <= 0xFFFF_FFFF
        [sec].pack('N')
      else
        MessagePack::Timestamp.to_msgpack_ext(sec, nsec)
      end
    end

    FACTORY = MessagePack::Factory.new.tap do |f|
      f.register_type(-1, ::Time, packer: TIME_PACKER, unpacker: MessagePack::Time::Unpacker)
    end
    private_constant :FACTORY, :TIME_PACKER

    attr_reader :serializer, :compressor, :compact

    # serializer: :msgpack (default), :json, :raw, :idlist.
    # compressor: :s2 (a Snappy block; default), :zstd, :none.
    # level: zstd level (3). dictionary: {id:, bytes:} a zstd dictionary to
    # write with (and read). dictionaries: {id => bytes} more to read with.
    # compact: write version 3. min_compress_size: 256 (negative: always try).
    # min_savings: 0.1 (0 for compact). max_decoded_size: 64 MiB.
    def initialize(serializer: :msgpack, compressor: :s2, level: 3, dictionary: nil, dictionaries: {},
                   compact: false, min_compress_size: 0, min_savings: 0, max_decoded_size: MAX_DECODED_SIZE,
                   marshal_fallback: false, objects: :attributes)
      raise ArgumentError, "kura: unknown serializer #{serializer.inspect}" unless %i[msgpack json raw idlist].include?(serializer)
      raise ArgumentError, "kura: unknown compressor #{compressor.inspect} (want :s2, :zstd or :none)" unless %i[s2 snappy zstd none].include?(compressor)
      raise ArgumentError, "kura: min_savings #{min_savings} must be below 1" if min_savings >= 1
      raise ArgumentError, 'kura: max_decoded_size must be positive' unless max_decoded_size.positive?

      @serializer = serializer
      @ser_id = SERIALIZERS.fetch(serializer)
      @compressor = compressor == :snappy ? :s2 : compressor
      @level = level
      @compact = compact
      @min_compress = if min_compress_size.zero? then DEFAULT_MIN_COMPRESS_SIZE
                      elsif min_compress_size.negative? then 0
                      else min_compress_size
                      end
      @min_savings = if min_savings.zero? then (compact ? 0 : DEFAULT_MIN_SAVINGS)
                     elsif min_savings.negative? then 0
                     else min_savings
                     end
      @max_decoded = max_decoded_size
      @marshal = marshal_fallback
      raise ArgumentError, "kura: objects: #{objects.inspect} (want :attributes or :marshal)" unless %i[attributes marshal].include?(objects)
      raise ArgumentError, 'kura: objects: :marshal needs marshal_fallback: true' if objects == :marshal && !marshal_fallback

      @plain_only = objects == :marshal
      @dicts = {}
      dictionaries.each { |id, b| add_dictionary(id, b) }
      if dictionary
        raise ArgumentError, 'kura: a dictionary needs compressor: :zstd' unless @compressor == :zstd

        @write_dict = dictionary.fetch(:id)
        add_dictionary(@write_dict, dictionary.fetch(:bytes))
      end
      @dicts.freeze
    end

    # The content-derived id of a dictionary: the first 28 bits of its SHA-256 (0 becomes 1).
    def self.dictionary_id(bytes)
      id = Digest::SHA256.digest(bytes).unpack1('N') >> 4
      id.zero? ? 1 : id
    end

    # The 16-byte digest a value names its dictionary by (field 0x06).
    def self.dictionary_digest(bytes)
      Digest::SHA256.digest(bytes).byteslice(0, 16)
    end

    # The 32-bit FNV-1a of a schema description (Go's codec.Fingerprint).
    def self.fingerprint(desc)
      h = 0x811c9dc5
      desc.b.each_byte { |c| h = ((h ^ c) * 0x01000193) & 0xFFFF_FFFF }
      h
    end

    def dictionary?(id, digest = nil)
      d = @dicts[id]
      return false unless d
      return true if digest.nil?

      d[:digest] == digest
    end

    # A copy of this codec that also reads with the dictionary bytes under id.
    def with_dictionary(id, bytes)
      c = dup
      c.instance_variable_set(:@dicts, @dicts.merge(id => dict_entry(bytes)).freeze)
      c
    end

    # --- encoding -------------------------------------------------------

    # The envelope of value. schema: a 32-bit fingerprint; written: Unix ms
    # (default now when a schema is given... or pass explicitly); ttl: ms;
    # cost: µs.
    def encode(value, schema: nil, written: nil, ttl: nil, cost: nil)
      ser = @ser_id
      begin
        payload = serialize(value)
      rescue ArgumentError, NoMethodError, TypeError, RangeError
        raise unless @marshal && @serializer == :msgpack

        # A Ruby object the one rule cannot represent: Marshal under user
        # serializer id 128, which only a Ruby reader with marshal_fallback
        # reads (Go and Node see an unknown serializer: a miss).
        ser = MARSHAL_ID
        payload = Marshal.dump(value).b
        schema = nil
      end
      if @compact && ser == 1 && value.is_a?(String) && value.encoding != Encoding::BINARY && value.valid_encoding?
        ser = 5
        payload = value.encode(Encoding::UTF_8).b
        schema = nil
      end
      raise ValueTooLargeError, "kura: value of #{payload.bytesize} bytes is over max_decoded_size #{@max_decoded}" if payload.bytesize > @max_decoded

      comp = 0
      stored = payload
      dict_id = 0
      if @compressor != :none && payload.bytesize >= @min_compress && payload.bytesize.positive?
        d = @write_dict && @dicts[@write_dict]
        out = @compressor == :s2 ? Native.snappy_compress(payload) : Native.zstd_compress(payload, @level, d && d[:bytes])
        saved = payload.bytesize - out.bytesize
        if saved.positive? && saved >= @min_savings * payload.bytesize && !ratio_too_high?(payload.bytesize, out.bytesize) &&
           readable?(ser, payload, out.bytesize)
          comp = COMPRESSORS.fetch(@compressor)
          stored = out
          dict_id = @write_dict || 0 if comp == 2
        end
      end
      digest = dict_id.positive? ? @dicts[dict_id][:digest] : nil
      header = if @compact && comp <= 1 && !digest && !ttl&.positive?
                 # a batch's values share one header (no length in it): built once
                 memo = @header_memo
                 unless memo && memo[0] == ser && memo[1] == comp && memo[2] == schema && memo[3] == written
                   memo = [ser, comp, schema, written,
                           compact_header(ser, comp, 0, 0, schema, written, nil, nil, nil).freeze].freeze
                   @header_memo = memo
                 end
                 String.new(memo[4], capacity: memo[4].bytesize + stored.bytesize)
               elsif @compact
                 compact_header(ser, comp, dict_id, payload.bytesize, schema, written, ttl, cost, digest)
               else
                 v2_header(ser, comp, dict_id, payload.bytesize, schema, written, ttl, cost, digest)
               end
      header << stored
    end

    # A cached "not found" (5 bytes).
    def encode_negative
      NEGATIVE.dup
    end

    # A lease placeholder naming token (Redis leases; docs/leases.md).
    def self.encode_lease(token, written: nil)
      fields = +''.b
      if written
        fields << "\x02".b << Varint.encode(Varint.encode(written).bytesize) << Varint.encode(written)
      end
      fields << "\x05".b << Varint.encode(token.bytesize) << token.b
      "\xC1K\x02\x02".b << Varint.encode(fields.bytesize) << fields
    end

    def serialize(value)
      case @serializer
      when :msgpack then pack(Codec.to_wire(value, plain: @plain_only))
      when :json then JSON.generate(Codec.to_wire(value, json: true, plain: @plain_only)).b
      when :raw
        raise ArgumentError, 'kura: the raw serializer takes a String' unless value.is_a?(String)

        value.b
      when :idlist then encode_idlist(value)
      end
    end

    # msgpack bytes of a wire value through the thread's packer (one per
    # thread and reused: a batch of 5,000 records allocates no packer).
    # Packer#clear keeps the buffer's memory: a packer that wrote more than
    # PACKER_KEEP bytes is dropped, or each Puma thread would hold the
    # largest value it ever wrote (up to max_decoded_size) until it ends.
    def pack(wire)
      pk = (Thread.current[:kura_packer] ||= FACTORY.packer)
      pk.clear
      begin
        pk.write(wire)
        out = pk.to_s
        Thread.current[:kura_packer] = nil if out.bytesize > PACKER_KEEP
        out
      ensure
        pk.clear
      end
    end

    PACKER_KEEP = 1 << 20

    # The msgpack/JSON form of a Ruby value (the one rule of docs/ruby.md).
    #
    # plain: only Hash, Array, String, Symbol, numbers, true/false/nil and
    # Time; anything else raises ArgumentError (a Rails store then keeps
    # the object with Marshal, so it reads back as the same class).
    def self.to_wire(v, json: false, plain: false)
      case v
      when nil, true, false, Integer, Float then v
      when String then v
      when Symbol then v.to_s
      when ::Time then json ? v.utc.strftime('%Y-%m-%dT%H:%M:%S.%NZ').sub(/\.?0+Z\z/, 'Z') : v
      when Hash then sorted_map(v, json, plain)
      when Array then v.map { |x| to_wire(x, json: json, plain: plain) }
      else
        raise ArgumentError, "kura: a #{v.class} is not a plain value" if plain

        object_to_wire(v, json)
      end
    end

    def self.object_to_wire(v, json)
      case v
      when Struct then v.each_pair.to_h { |k, x| [k.to_s, to_wire(x, json: json)] }
      else
        if v.respond_to?(:attributes) && v.attributes.is_a?(Hash)
          v.attributes.to_h { |k, x| [k.to_s, to_wire(x, json: json)] }
        elsif defined?(::Date) && v.is_a?(::Date)
          v.iso8601
        elsif defined?(::BigDecimal) && v.is_a?(::BigDecimal)
          v.to_s('F')
        elsif v.respond_to?(:to_h)
          sorted_map(v.to_h, json)
        else
          raise ArgumentError, "kura: cannot encode a #{v.class} (use a Hash, Array, Struct, String, Integer, Float, Time, true, false, nil)"
        end
      end
    end

    # Key orders by key list: records of one shape share one sort. The
    # cached entry is [order, every key a String]. At most 1,024 shapes
    # of at most MEMO_KEYS keys are kept: a Hash with a million keys (or a
    # stream of new shapes) is sorted each time, not held.
    MEMO_KEYS = 256
    @key_orders = {}
    @key_orders_lock = Mutex.new
    # Values msgpack writes as they are (a Time as the timestamp extension).
    AS_IS_LIST = [NilClass, TrueClass, FalseClass, Integer, Float, String, ::Time].freeze

    def self.sorted_map(h, json, plain = false)
      keys = h.keys
      order, strings = @key_orders[keys]
      unless order
        order = keys.sort_by { |k| (k.is_a?(String) ? k : k.to_s).b }.freeze
        strings = keys.all?(String)
        if keys.length <= MEMO_KEYS
          @key_orders_lock.synchronize do
            @key_orders.clear if @key_orders.size >= 1024
            @key_orders[keys.freeze] = [order, strings].freeze
          end
        end
      end
      # String keys and values msgpack writes as they are (most records):
      # the pairs in key order by C calls (values' classes, slice), with no
      # Ruby step per field.
      if strings && !json && (h.values.map(&:class) - AS_IS_LIST).empty?
        return order == keys ? h : h.slice(*order)
      end

      out = {}
      order.each { |k| out[k.is_a?(String) ? k : k.to_s] = to_wire(h[k], json: json, plain: plain) }
      out
    end

    def encode_idlist(ids)
      out = Varint.encode(ids.length)
      prev = 0
      ids.each do |id|
        raise ArgumentError, 'kura: idlist takes Integers' unless id.is_a?(Integer)

        d = id - prev
        z = d.negative? ? ((-d) << 1) - 1 : d << 1
        out << Varint.encode(z)
        prev = id
      end
      out
    end

    def v2_header(ser, comp, dict_id, raw_len, schema, written, ttl, cost, digest)
      fields = +''.b
      fields << "\x01\x04".b << [schema].pack('N') if schema
      add_uvarint_field(fields, 2, written) if written
      add_uvarint_field(fields, 3, ttl) if ttl&.positive?
      add_uvarint_field(fields, 4, cost) if cost && ttl&.positive?
      fields << "\x06\x10".b << digest if digest
      out = +"\xC1K\x02\x00".b
      out << Varint.encode(fields.bytesize) << fields
      out << ser.chr << comp.chr << Varint.encode(dict_id) << Varint.encode(raw_len)
    end

    def add_uvarint_field(out, tag, x)
      v = Varint.encode(x)
      out << tag.chr << v.bytesize.chr << v
    end

    def compact_header(ser, comp, dict_id, raw_len, schema, written, ttl, cost, digest)
      b2 = 3
      b2 |= 0x10 if comp == 1
      layout = ser <= 7 ? ser : 0
      layout |= 0x08 if comp > 1
      layout |= 0x10 if schema
      secs = written && (written / 1000) - COMPACT_EPOCH
      secs = nil if secs && (secs.negative? || secs > (1 << 33))
      layout |= 0x20 if secs
      fields = +''.b
      if ttl&.positive?
        add_uvarint_field(fields, 3, ttl)
        add_uvarint_field(fields, 4, cost) if cost
      end
      fields << "\x06\x10".b << digest if digest
      layout |= 0x40 unless fields.empty?
      out = +"\xC1K".b
      out << b2.chr << layout.chr
      out << ser.chr if ser > 7
      out << [schema].pack('N') if schema
      out << Varint.encode(secs) if secs
      out << Varint.encode(fields.bytesize) << fields unless fields.empty?
      if comp > 1
        out << comp.chr << Varint.encode(dict_id)
        out << Varint.encode(raw_len) unless comp == 3
      end
      out
    end

    def ratio_too_high?(raw, stored)
      raw > RATIO_FLOOR && raw > MAX_RATIO * stored
    end

    # Would a reader's allocation bound for stored bytes admit this payload?
    def readable?(ser, payload, stored)
      return true if payload.bytesize <= 2048

      case ser
      when 1, 6 then MsgpackCheck.check(payload, stored)
      when 2 then json_cost(payload) <= MsgpackCheck.alloc_bound(stored)
      else true
      end
    rescue MalformedError
      false
    end

    def json_cost(raw)
      96 * (raw.count('[{,:') + 1) + raw.bytesize
    end

    # --- decoding -------------------------------------------------------

    # Decodes an envelope: an Entry, or raises MalformedError /
    # NotUnderstoodError. Never raises anything else for any input.
    def decode(b)
      b = b.b unless b.encoding == Encoding::BINARY
      n = b.bytesize
      malformed(:truncated, 'empty value') if n.zero?
      malformed(:not_kura, 'not a kura value') if b.getbyte(0) != 0xC1 || (n > 1 && b.getbyte(1) != 0x4B)
      malformed(:truncated, 'entry shorter than its header') if n < 3
      vb = b.getbyte(2)
      case vb & 0x0F
      when 1 then decode_v1(b, vb)
      when 2
        not_understood(:unsupported_version, format('version byte 0x%02x', vb)) if vb & 0xF0 != 0
        decode_v2(b)
      when 3
        not_understood(:unsupported_version, format('version 3 reserved bits 0x%02x', vb)) if vb & 0xC0 != 0
        decode_v3(b, vb)
      else
        not_understood(:unsupported_version, "format version #{vb & 0x0F}")
      end
    rescue MalformedError, NotUnderstoodError
      raise
    rescue StandardError => e
      raise MalformedError.new(:corrupt, "unexpected #{e.class}")
    end

    private

    def malformed(code, msg)
      raise MalformedError.new(code, msg)
    end

    def not_understood(code, msg)
      raise NotUnderstoodError.new(code, msg)
    end

    def dict_entry(bytes)
      bytes = bytes.b.freeze
      { bytes: bytes, digest: Codec.dictionary_digest(bytes), s2: S2.parse_dict(bytes) }
    end

    def add_dictionary(id, bytes)
      raise ArgumentError, "kura: dictionary id #{id} must be 1 to 2^32-1" unless id.is_a?(Integer) && id.positive? && id <= 0xFFFF_FFFF

      @dicts[id] = dict_entry(bytes)
    end

    def uvarint(b, i, stop = b.bytesize)
      x, j = Varint.read(b, i, stop)
      malformed(:truncated, 'header cut short') if x.nil?
      [x, j]
    end

    def decode_v1(b, vb)
      not_understood(:unsupported_version, format('version 1 flags 0x%02x', vb)) if vb & 0xE0 != 0
      if vb & 0x10 != 0
        malformed(:corrupt, 'negative entry with trailing bytes') if b.bytesize != 3
        return Entry.of(:negative, 1)
      end
      e = Entry.of(:value, 1)
      decode_value(b, 3, e)
    end

    def decode_v2(b)
      n = b.bytesize
      malformed(:truncated, 'no kind byte') if n < 4
      kind = b.getbyte(3)
      not_understood(:not_understood, "entry kind #{kind}") if kind > 3
      flen, i = uvarint(b, 4)
      malformed(:corrupt, "field section of #{flen} bytes (at most #{MAX_FIELDS_LEN})") if flen > MAX_FIELDS_LEN
      malformed(:truncated, 'field section longer than the entry') if flen > n - i
      e = Entry.of(KINDS[kind], 2)
      parse_fields(b, i, i + flen, e, false, false)
      i += flen
      unless kind.zero?
        malformed(:corrupt, 'bytes after a non-value entry') if i != n
        return e
      end
      decode_value(b, i, e)
    end

    def parse_fields(b, i, stop, e, compact, slot)
      seen = 0
      while i < stop
        tag = b.getbyte(i)
        len, i = Varint.read(b, i + 1, stop)
        malformed(:corrupt, 'field length past its section') if len.nil? || len > stop - i
        data = b.byteslice(i, len)
        i += len
        if tag < 64
          malformed(:corrupt, format('field 0x%02x twice', tag)) if seen[tag] == 1
          seen |= 1 << tag
        end
        case tag
        when 1
          malformed(:corrupt, 'schema field in a compact field section') if compact
          malformed(:corrupt, 'schema field not 4 bytes') if len != 4
          e.schema = data.unpack1('N')
        when 2
          malformed(:corrupt, 'written field in a compact field section') if compact
          e.written = exact_uvarint(data)
        when 3
          malformed(:corrupt, 'ttl both in the slot and the fields') if slot
          e.ttl = exact_uvarint(data)
        when 4
          malformed(:corrupt, 'cost both in the slot and the fields') if slot
          e.cost = exact_uvarint(data)
        when 5 then e.token = data
        when 6
          malformed(:corrupt, 'dict digest not 16 non-zero bytes') if len != 16 || data == ("\0" * 16).b
          e.digest = data
        else
          not_understood(:not_understood, format('critical field 0x%02x', tag)) if tag & 0x80 != 0
        end
      end
    end

    def exact_uvarint(data)
      x, j = Varint.read(data, 0, data.bytesize)
      malformed(:corrupt, 'field is not exactly one uvarint') if x.nil? || j != data.bytesize
      x
    end

    def decode_v3(b, vb)
      n = b.bytesize
      malformed(:truncated, 'no layout byte') if n < 4
      layout = b.getbyte(3)
      not_understood(:not_understood, 'compact layout bit 0x80') if layout & 0x80 != 0
      e = Entry.of(:value, 3)
      i = 4
      ser = layout & 7
      if ser.zero?
        malformed(:truncated, 'serializer byte missing') if i >= n
        ser = b.getbyte(i)
        i += 1
        malformed(:corrupt, "serializer #{ser} written as a byte") if ser <= 7
      end
      if layout & 0x10 != 0
        malformed(:truncated, 'schema cut short') if n - i < 4
        e.schema = b.byteslice(i, 4).unpack1('N')
        i += 4
      end
      if layout & 0x20 != 0
        s, i = uvarint(b, i)
        malformed(:corrupt, 'write time over 2^33 s') if s > (1 << 33)
        e.written = (COMPACT_EPOCH + s) * 1000
      end
      slot = vb & 0x20 != 0
      if slot
        t, i = uvarint(b, i)
        malformed(:corrupt, 'ttl of 0 s or over 2^33 s') if t.zero? || t > (1 << 33)
        c, i = uvarint(b, i)
        e.ttl = t * 1000
        e.cost = c
      end
      if layout & 0x40 != 0
        flen, i = uvarint(b, i)
        malformed(:corrupt, 'field section over 4096 bytes') if flen > MAX_FIELDS_LEN
        malformed(:truncated, 'field section longer than the entry') if flen > n - i
        parse_fields(b, i, i + flen, e, true, slot)
        i += flen
      end
      snappy = vb & 0x10 != 0
      comp = 0
      dict = 0
      raw_len = nil
      if layout & 0x08 != 0
        malformed(:corrupt, 's2 bit and a compressor byte') if snappy
        malformed(:truncated, 'compressor byte missing') if i >= n
        comp = b.getbyte(i)
        i += 1
        malformed(:corrupt, "compressor #{comp} in a compact compressor byte") if comp <= 1
        dict, i = uvarint(b, i)
        malformed(:corrupt, 'dictionary id over 2^32-1') if dict > 0xFFFF_FFFF
        raw_len, i = uvarint(b, i) unless comp == 3
      elsif snappy
        comp = 1
      end
      e.serializer = ser
      e.compressor = comp
      e.dict = dict
      payload = b.byteslice(i, n - i)
      if comp == 1 || comp == 3
        raw_len, = Varint.read(payload, 0, payload.bytesize)
        malformed(:truncated, 'block without its length') if raw_len.nil?
      end
      raw_len ||= payload.bytesize
      finish_value(e, ser, comp, dict, raw_len, payload, n)
    end

    def decode_value(b, i, e)
      n = b.bytesize
      malformed(:truncated, 'value header cut short') if n - i < 2
      ser = b.getbyte(i)
      comp = b.getbyte(i + 1)
      dict, i = uvarint(b, i + 2)
      malformed(:corrupt, 'dictionary id over 2^32-1') if dict > 0xFFFF_FFFF || i - 0 > n
      raw_len, i = uvarint(b, i)
      e.serializer = ser
      e.compressor = comp
      e.dict = dict
      payload = b.byteslice(i, n - i)
      finish_value(e, ser, comp, dict, raw_len, payload, n)
    end

    def finish_value(e, ser, comp, dict, raw_len, payload, stored_len)
      malformed(:unknown_serializer, "serializer #{ser}") unless ser.between?(1, 6) || (@marshal && ser == MARSHAL_ID)
      malformed(:too_large, "value of #{raw_len} bytes over the limit #{@max_decoded}") if raw_len > @max_decoded
      raw = if comp.zero?
              malformed(:corrupt, 'dictionary without a compressor') unless dict.zero?
              malformed(:truncated, 'payload shorter than its length') if payload.bytesize < raw_len
              malformed(:corrupt, 'payload longer than its length') if payload.bytesize > raw_len
              payload
            else
              decompress(e, comp, dict, raw_len, payload)
            end
      e.value = deserialize(ser, raw, stored_len, !comp.zero?)
      e
    end

    def decompress(e, comp, dict, raw_len, payload)
      malformed(:unknown_compressor, "compressor #{comp}") unless comp.between?(1, 3)
      malformed(:bomb, "#{raw_len} bytes from #{payload.bytesize} stored") if ratio_too_high?(raw_len, payload.bytesize)
      d = nil
      if comp == 3 || dict.positive?
        malformed(:corrupt, 's2-dict without a dictionary') if dict.zero?
        malformed(:corrupt, 'snappy with a dictionary') if comp == 1
        d = @dicts[dict]
        unless d
          err = MalformedError.new(:unknown_dictionary, "dictionary #{dict} is not held")
          err.dict = dict
          err.digest = e.digest
          raise err
        end
        if e.digest && d[:digest] != e.digest
          err = MalformedError.new(:unknown_dictionary, "dictionary #{dict} does not match the value's digest (dictionary_mismatch)")
          err.dict = dict
          err.digest = e.digest
          raise err
        end
      end
      case comp
      when 1
        claimed = Native.snappy_claimed_length(payload)
        malformed(:corrupt, "snappy block claims #{claimed.inspect} bytes, header #{raw_len}") if claimed != raw_len
        Native.snappy_uncompress(payload, raw_len) || malformed(:corrupt, 'snappy block is corrupt')
      when 2
        cs = Native.zstd_content_size(payload)
        malformed(:corrupt, 'not a zstd frame') if cs.nil?
        malformed(:corrupt, "zstd frame claims #{cs} bytes, header #{raw_len}") if cs.is_a?(Integer) && cs != raw_len
        Native.zstd_decompress(payload, raw_len, d && d[:bytes]) || malformed(:corrupt, 'zstd frame is corrupt')
      when 3
        malformed(:unknown_dictionary, "dictionary #{dict} is not in S2's format") unless d[:s2]
        begin
          S2.decode(payload, raw_len, d[:s2])
        rescue S2::Corrupt => ex
          malformed(:corrupt, "s2: #{ex.message}")
        end
      end
    end

    BIG_CONTAINERS = /[\xdd\xdf]/n.freeze
    private_constant :BIG_CONTAINERS

    def deserialize(ser, raw, stored_len, compressed)
      case ser
      when 1, 6
        # msgpack-ruby preallocates only array32/map32 counts; it stops at
        # 128 levels and at a length past the bytes (str, bin, ext, array16,
        # map16). So a payload stored as is with no 0xDD/0xDF byte anywhere
        # allocates in proportion to its bytes and skips the walk; any
        # other (and every decompressed payload) is walked first.
        MsgpackCheck.check(raw, stored_len) if compressed || raw.match?(BIG_CONTAINERS)
        begin
          FACTORY.load(raw)
        rescue StandardError => ex
          malformed(:deserialize, "msgpack: #{ex.class}")
        end
      when 2
        malformed(:bomb, 'json would allocate over the bound') if json_cost(raw) > MsgpackCheck.alloc_bound([raw.bytesize, stored_len].min)
        s = raw.dup.force_encoding(Encoding::UTF_8)
        malformed(:deserialize, 'json: not UTF-8') unless s.valid_encoding?
        begin
          JSON.parse(s, max_nesting: 10_000, allow_nan: false)
        rescue JSON::ParserError, JSON::NestingError
          malformed(:deserialize, 'json: not a JSON document')
        end
      when 3 then raw.b
      when 4 then decode_idlist(raw)
      when MARSHAL_ID
        begin
          Marshal.load(raw) # rubocop:disable Security/MarshalLoad -- what Rails' own stores do
        rescue StandardError, SystemStackError, NoMemoryError => ex
          # Marshal recurses per nesting level (200,000 levels in 400 KB:
          # SystemStackError) and preallocates the count an array or hash
          # claims (9 bytes: NoMemoryError): neither is a StandardError.
          malformed(:deserialize, "marshal: #{ex.class}")
        end
      when 5
        s = raw.dup.force_encoding(Encoding::UTF_8)
        malformed(:deserialize, 'string: not UTF-8') unless s.valid_encoding?
        s
      end
    end

    def decode_idlist(raw)
      count, i = Varint.read(raw, 0, raw.bytesize)
      malformed(:deserialize, 'idlist: no count') if count.nil?
      malformed(:bomb, "idlist: #{count} ids in #{raw.bytesize} bytes") if count > raw.bytesize - i
      prev = 0
      out = Array.new(count) do
        z, i = Varint.read(raw, i, raw.bytesize)
        malformed(:deserialize, 'idlist: cut short') if z.nil?
        d = z.odd? ? -((z + 1) >> 1) : z >> 1
        prev += d
        malformed(:deserialize, 'idlist: id beyond 64 bits') if prev > (2**63) - 1 || prev < -(2**63)
        prev
      end
      malformed(:deserialize, 'idlist: bytes after the ids') if i != raw.bytesize
      out
    end
  end
end
