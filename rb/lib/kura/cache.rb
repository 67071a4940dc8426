# frozen_string_literal: true

require 'securerandom'
require 'logger'
require_relative 'codec'
require_relative 'store'

module Kura
  # A read-through cache over a Store (MemcacheStore, RedisStore), sharing
  # values, leases and key placement with kura's Go and Node caches.
  #
  #   cache = Kura::Cache.new(Kura::MemcacheStore.new(%w[127.0.0.1:11211]), ttl: 300)
  #   user  = cache.fetch("user:42") { User.find_by(id: 42)&.attributes }   # nil is cached as "not found"
  #   rows  = cache.fetch_multi(*keys) { |missing| load(missing) }        # => { key => value } of the found
  #
  # One read per server, one block call for all misses, one batched
  # write-back per server. No cache error reaches a fetch caller (it is
  # counted, logged, and the block answers); only the block's errors do.
  # TTLs are seconds. Thread-safe; usable across fork (connections and
  # probes reopen in the child).
  class Cache
    DEFAULTS = {
      ttl: 0, negative_ttl: 60, ttl_jitter: 0.1, max_value_size: 4 << 20, warn_value_size: 100 << 10,
      leases: true, lease_ttl: 10, lease_wait: 2.0
    }.freeze

    STAT_NAMES = %i[hits misses negative_hits loads load_errors writes bytes_written write_errors store_errors
                    decode_errors not_understood lease_waits lease_fail_open lease_fills_lost too_large].freeze

    attr_reader :store, :codec

    # codec: Kura::Codec (default msgpack + Snappy in the compact envelope,
    # version 3, as Go's kura.New writes; every kura reader reads it); ttl: seconds (0:
    # none); negative_ttl: seconds a "not found" is cached (0: not
    # cached); ttl_jitter: each TTL shortened by up to this fraction;
    # max_value_size / warn_value_size: bytes; leases: one load per key
    # across processes and languages (docs/leases.md); as: a Struct
    # class (or anything with .new(**fields)) a read map decodes into;
    # schema: the description a Go or Node reader states (its fingerprint
    # is written on every value); logger: where warnings go (never a value).
    def initialize(store, codec: Codec.new(compact: true), as: nil, schema: nil, logger: nil, on_error: nil, **opts)
      unknown = opts.keys - DEFAULTS.keys
      raise ArgumentError, "kura: unknown option #{unknown.first.inspect}" unless unknown.empty?

      @store = store
      @codec = codec
      @o = DEFAULTS.merge(opts)
      # an infinite ttl passed here and raised FloatDomainError out of every
      # fetch that wrote; an infinite lease_ttl made every lease a store error
      %i[ttl negative_ttl lease_ttl].each { |k| check_ttl(k, @o[k]) }
      raise ArgumentError, 'kura: lease_wait must be a number of seconds >= 0' unless @o[:lease_wait].is_a?(Numeric) && @o[:lease_wait] >= 0
      raise ArgumentError, 'kura: ttl_jitter must be in 0...1' unless @o[:ttl_jitter].between?(0, 0.999)
      raise ArgumentError, 'kura: lease_ttl must be positive' if @o[:leases] && !@o[:lease_ttl].positive?

      @as = as
      @schema = schema && Codec.fingerprint(schema)
      @logger = logger
      @on_error = on_error
      @leases = @o[:leases] && store.respond_to?(:leases?) && store.leases?
      @lease_ttl_ms = (@o[:lease_ttl] * 1000).round
      @stats = Hash.new(0)
      @stats_lock = Mutex.new
      @dead_dicts = {}
      @dict_lock = Mutex.new
    end

    # Whether leases coordinate loads (:leases) or each process loads (:process).
    def coordination
      @leases ? :leases : :process
    end

    # Counters since start (a copy).
    def stats
      @stats_lock.synchronize { STAT_NAMES.to_h { |k| [k, @stats[k]] } }
    end

    # The value of key, or the block's (called with key) on a miss. A block
    # returning nil caches "not found" for negative_ttl and returns nil.
    def fetch(key, ttl: nil, negative_ttl: nil)
      raise ArgumentError, 'kura: fetch needs a block' unless block_given?

      key = key.to_s
      got = fetch_multi(key, ttl: ttl, negative_ttl: negative_ttl) { |missing| { missing[0] => yield(missing[0]) } }
      got[key]
    end

    # The values of keys: { key => value } of those found (in the cache or
    # by the block). The block is called once with every missing key and
    # returns { key => value } (a key left out, or nil, is "not found").
    def fetch_multi(*keys, ttl: nil, negative_ttl: nil, &block)
      raise ArgumentError, 'kura: fetch_multi needs a block' unless block

      check_ttl(:ttl, ttl) unless ttl.nil?
      check_ttl(:negative_ttl, negative_ttl) unless negative_ttl.nil?
      keys = keys.flatten.map(&:to_s).uniq
      return {} if keys.empty?

      with_owner_memo { fetch_keys(keys, ttl, negative_ttl, block) }
    end

    def fetch_keys(keys, ttl, negative_ttl, block)
      out = {}
      won = {}
      raw = if @leases && @store.respond_to?(:read_lease)
              read_leased(keys, won)
            else
              read_raw(keys)
            end
      misses = []
      no_write = {}
      held = []
      prev = {}
      kinds = won.empty? ? classify_all(keys, raw) : classify_all(keys.reject { |k| won.key?(k) }, raw)
      keys.each do |k|
        if won.key?(k)
          misses << k
          next
        end
        kind, v = kinds[k]
        case kind
        when :hit then out[k] = v
        when :absent then nil
        when :held then held << k
        when :no_write then no_write[k] = true
        when :prev then prev[k] = v
        end
        misses << k unless kind == :hit || kind == :absent
      end
      count(:hits, keys.length - misses.length)
      count(:misses, misses.length)
      return out if misses.empty?

      neg = negative_ttl || @o[:negative_ttl]
      loaded = if @leases
                 lease_load(misses, no_write, held, prev, ttl, neg, block, won)
               else
                 plain_load(misses, no_write, ttl, neg, block)
               end
      loaded.each { |k, v| out[k] = v unless v.nil? }
      out
    end

    private :fetch_keys

    # The value of key, or nil (absent, "not found", unreadable). Store
    # errors are counted and read as nil.
    def read(key)
      key = key.to_s
      kind, v = classify_all([key], read_raw([key]))[key]
      kind == :hit ? v : nil
    end

    # Reads keys: { key => value } of the hits. One read per server.
    def read_multi(*keys)
      keys = keys.flatten.map(&:to_s).uniq
      kinds = classify_all(keys, read_raw(keys))
      keys.each_with_object({}) do |k, h|
        kind, v = kinds[k]
        h[k] = v if kind == :hit
      end
    end

    # Writes values ({ key => value }), one batch per server. Returns
    # true when every server took its batch.
    def write_multi(hash, ttl: nil)
      check_ttl(:ttl, ttl) unless ttl.nil?
      written = now_ms
      items = hash.filter_map do |k, v|
        t = jitter(ttl || @o[:ttl])
        b = v.nil? ? @codec.encode_negative : encode_value(k.to_s, v, written, t)
        b && [k.to_s, b, t]
      end
      write_items(items) && items.length == hash.length
    end

    def write(key, value, ttl: nil)
      write_multi({ key => value }, ttl: ttl)
    end

    # Deletes keys (memcached md, Redis DEL). Any lease on them is void:
    # a fill that started before lands nowhere (docs/leases.md). Raises
    # StoreError when a server did not take it (the invalidation did not
    # happen there).
    def invalidate(*keys)
      keys = keys.flatten.map(&:to_s).reject(&:empty?) # never stored: nothing to delete
      return true if keys.empty?

      g = group_keys(keys)
      errs = @store.del_batch(g).values.select { |r| r.is_a?(StoreError) }
      raise errs.first unless errs.empty?

      true
    end
    alias delete invalidate

    # The seed's fetch_by_idx: the id list under index_key (ids: called on
    # a miss, stored as an idlist Go's codec.IDList reads), then the
    # records by id with fetch_multi (records: called once with the
    # missing ids, returns { id => record }). Records in id order.
    def fetch_by_index(index_key, record_key:, ids:, records:, ttl: nil, index_ttl: nil)
      id_list = index_cache.fetch(index_key, ttl: index_ttl || ttl) { ids.call } || []
      keys = id_list.map { |id| record_key.call(id) }
      by_key = keys.zip(id_list).to_h
      got = fetch_multi(*keys, ttl: ttl) do |missing|
        loaded = records.call(missing.map { |k| by_key[k] }) || {}
        missing.to_h { |k| [k, loaded[by_key[k]]] }
      end
      keys.filter_map { |k| got[k] }
    end

    private

    def index_cache
      @index_cache ||= Cache.new(@store, codec: Codec.new(serializer: :idlist, compressor: :none), logger: @logger,
                                         on_error: @on_error, **@o)
    end

    def count(name, n = 1)
      return if n.zero?

      @stats_lock.synchronize { @stats[name] += n }
    end

    def report(op, key, err)
      @on_error&.call(op, key, err)
      @logger&.warn("kura: #{op} #{key}: #{err.message}")
    rescue StandardError
      nil
    end

    def now_ms
      (Time.now.to_r * 1000).to_i
    end

    def mono
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end

    # A TTL (the constructor's or a call's) must be a finite number of
    # seconds >= 0: a negative one was stored as "no expiry" (0 on the
    # wire), and NaN raised FloatDomainError after the block ran.
    def check_ttl(name, secs)
      return if secs.is_a?(Numeric) && secs.to_f.finite? && secs >= 0

      raise ArgumentError, "kura: #{name} must be a finite number of seconds >= 0 (0: no expiry), got #{secs.inspect}"
    end

    # A TTL in ms, shortened by up to ttl_jitter (0 stays 0: no expiry). A
    # positive TTL under 1 ms is 1 ms, never 0 (which is "no expiry").
    def jitter(secs)
      ms = (secs * 1000).ceil
      return 0 unless ms.positive?
      return ms if @o[:ttl_jitter].zero?

      [1, (ms * (1 - (rand * @o[:ttl_jitter]))).round].max
    end

    # { node => [key, ...] }; owners looked up once per key per call (the
    # ring hashes the key) and kept in the thread's memo of the call.
    def group_keys(keys)
      memo = Thread.current[:kura_owner_memo]
      out = {}
      keys.each { |k| (out[node_of(k, memo)] ||= []) << k }
      out
    end

    def node_of(key, memo = Thread.current[:kura_owner_memo])
      memo ? (memo[key] ||= @store.node_of(key)) : @store.node_of(key)
    end

    def with_owner_memo
      return yield if Thread.current[:kura_owner_memo]

      Thread.current[:kura_owner_memo] = {}
      begin
        yield
      ensure
        Thread.current[:kura_owner_memo] = nil
      end
    end

    # The empty key has no wire form (memcached keys are 1 to 250 bytes,
    # Go's store refuses it): read as an unreadable miss the block answers
    # and nothing writes. Sent, it failed its whole server's batch, so every
    # key beside it went to the block and was never cached.
    EMPTY_KEY = StoreError.new('-', 'the empty key is never stored').freeze

    def empty_keys(keys)
      keys.each_with_object({}) { |k, h| h[k] = EMPTY_KEY if k.empty? }
    end

    # { key => bytes | nil | StoreError }: one read per server.
    def read_raw(keys)
      out = empty_keys(keys)
      per_node(group_keys(keys.reject(&:empty?)), :get, ->(g) { @store.get_batch(g) }) do |ks, r|
        if r.is_a?(StoreError)
          ks.each { |k| out[k] = r }
        else
          ks.each_with_index { |k, i| out[k] = r[i] }
        end
      end
      out
    end

    # The read of a leased fetch on a store that leases as it reads
    # (memcached's mg N): { key => bytes | nil | StoreError | :held },
    # filling won with the leases taken.
    def read_leased(keys, won)
      out = empty_keys(keys)
      per_node(group_keys(keys.reject(&:empty?)), :get, ->(g) { @store.read_lease(g, @lease_ttl_ms) }) do |ks, r|
        if r.is_a?(StoreError)
          ks.each { |k| out[k] = r }
          next
        end
        ks.each_with_index do |k, i|
          kind, v = r[i]
          case kind
          when :value then out[k] = v
          when :won then won[k] = v
          when :held then out[k] = :held
          end
        end
      end
      out
    end

    # Runs one batched store call over groups ({ node => keys }) and yields
    # each node's keys with its answer, or with a StoreError (counted and
    # reported) when the node failed, did not answer, or the call raised.
    def per_node(groups, op, call)
      res = begin
        call.call(groups)
      rescue StandardError => e
        groups.to_h { |n, _| [n, StoreError.new(n, "#{e.class}: #{e.message}")] }
      end
      groups.each do |node, ks|
        r = res[node]
        if r.is_a?(StoreError) || r.nil?
          r ||= StoreError.new(node, 'no answer')
          count(:store_errors, ks.length)
          report(op, ks.first, r)
        end
        yield ks, r
      end
    end

    # classify for every key; values naming a dictionary this codec does
    # not hold are classified again after the dictionaries were looked up
    # where Go's dictstore publishes them (checked by content id and, when
    # the value names one, by digest); one still missing is a miss left in
    # place (not understood).
    def classify_all(keys, raw)
      out = keys.to_h { |k| [k, classify(k, raw[k], true)] }
      wanted = out.values.filter_map { |kind, v| v if kind == :dict }.uniq
      return out if wanted.empty?

      load_dictionaries(wanted)
      out.each_key { |k| out[k] = classify(k, raw[k]) if out[k][0] == :dict }
      out
    end

    DICT_MAX = 1 << 20

    def load_dictionaries(wanted)
      now = mono
      wanted.each do |id, digest|
        next if @codec.dictionary?(id, digest)
        next if (@dead_dicts[id] || 0) > now

        found = nil
        if @store.respond_to?(:node_keys)
          keys = @store.node_keys(format('kura:dict:%08x', id))
          read_raw(keys).each_value do |b|
            next unless b.is_a?(String) && b.bytesize <= DICT_MAX
            next unless Codec.dictionary_id(b) == id
            next if digest && Codec.dictionary_digest(b) != digest

            found = b
            break
          end
        end
        if found
          @codec = @codec.with_dictionary(id, found)
        else
          @dict_lock.synchronize do
            @dead_dicts.clear if @dead_dicts.size > 1024
            @dead_dicts[id] = now + 10
          end
        end
      end
    rescue StandardError => e
      report(:dictionary, wanted.first.to_s, e)
    end

    # [:hit, value] [:absent] [:miss] [:held] [:no_write] [:prev, bytes] [:dict, [id, digest]]
    def classify(key, b, resolve = false)
      return [:held] if b == :held
      return [:no_write] if b.is_a?(StoreError)
      return [:miss] if b.nil?

      e = @codec.decode(b)
      case e.kind
      when :value then [:hit, shape(e.value)]
      when :negative
        count(:negative_hits)
        [:absent]
      else [:held]
      end
    rescue NotUnderstoodError => err
      count(:not_understood)
      report(:decode, key, err)
      [:no_write]
    rescue MalformedError => err
      # A dictionary this reader does not hold: written by a writer that
      # has it; a miss left in place, as a value it does not understand.
      if err.code == :unknown_dictionary
        return [:dict, [err.dict, err.digest]] if err.dict && resolve

        count(:not_understood)
        report(:decode, key, err)
        return [:no_write]
      end
      count(:decode_errors)
      report(:decode, key, err)
      [:prev, b]
    rescue ArgumentError, TypeError => err
      count(:decode_errors)
      report(:decode, key, err)
      [:prev, b]
    end

    def shape(v)
      return v unless @as && v.is_a?(Hash)

      if @as.respond_to?(:members) && !@as.keyword_init?
        # A plain Struct takes its members by position: on Ruby 3.1 keyword
        # arguments went whole into the first member ({id: 1, name: "x"}
        # as id, name nil), a wrong value with no error.
        @as.new(*@as.members.map { |m| v[m.to_s] })
      else
        @as.new(**v.select { |k, _| as_keys.nil? || as_keys.include?(k) }.transform_keys(&:to_sym))
      end
    end

    # The keywords @as takes (nil: any). A field another writer added is
    # left out rather than refused (refused, the value was reloaded and
    # overwritten for every reader).
    def as_keys
      return @as_keys if defined?(@as_keys)

      @as_keys = if @as.respond_to?(:members)
                   @as.members.map(&:to_s)
                 else
                   params = @as.instance_method(:initialize).parameters
                   params.any? { |t, _| t == :keyrest } ? nil : params.filter_map { |t, n| n.to_s if %i[key keyreq].include?(t) }
                 end
    end

    # The envelope of a loaded value, or nil (too large, not encodable).
    def encode_value(key, value, written, ttl_ms)
      b = @codec.encode(value, schema: @schema, written: written)
      if b.bytesize > @o[:max_value_size]
        count(:too_large)
        report(:set, key, ValueTooLargeError.new(size_message(key, b.bytesize, 'not stored: over max_value_size ' \
                                                                                 "#{@o[:max_value_size]} B")))
        return nil
      end
      @logger&.warn(size_message(key, b.bytesize, 'is large')) if b.bytesize > @o[:warn_value_size]
      b
    rescue StandardError => e
      # Not a cache error for the caller: the value is returned, not stored
      # (msgpack raises RangeError past 64 bits, an object's #attributes
      # may raise anything).
      count(:too_large) if e.is_a?(ValueTooLargeError)
      report(:encode, key, e)
      nil
    end

    # The field report's lesson (a 1.3 MB value cost 8 s per SET on a
    # small node's network): what a value of n bytes costs on the wire.
    def size_message(key, n, what)
      format('kura: value for %<key>s (%<kb>.1f KB) %<what>s: every read and write moves it whole, ' \
             '%<ms>.1f ms at 1 Gbit/s and far more on a small cache node whose network is throttled ' \
             '(a 1.3 MB value took 8 s per SET there); cache smaller pieces or an index of ids',
             key: key, kb: n / 1000.0, what: what, ms: n * 8 / 1e6)
    end

    def call_block(keys, block)
      count(:loads)
      start = mono
      got = begin
        block.call(keys)
      rescue StandardError
        count(:load_errors)
        raise
      end
      got = {} if got.nil?
      raise ArgumentError, "kura: the fetch_multi block returned a #{got.class}, want a Hash" unless got.respond_to?(:to_h)

      got = got.to_h.transform_keys(&:to_s)
      [got, ((mono - start) * 1e6).round]
    end

    def plain_load(keys, no_write, ttl, neg, block)
      got, _cost = call_block(keys, block)
      written = now_ms
      items = []
      keys.each do |k|
        next if no_write[k]

        v = got[k]
        if v.nil?
          t = jitter(neg)
          items << [k, @codec.encode_negative, t] if neg.positive?
        else
          t = jitter(ttl || @o[:ttl])
          b = encode_value(k, v, written, t)
          items << [k, b, t] if b
        end
      end
      write_items(items)
      keys.to_h { |k| [k, got[k]] }
    end

    def write_items(items)
      given = items.length
      items = items.reject { |it| it[0].empty? }
      return items.length == given if items.empty?

      g = {}
      items.each { |it| (g[node_of(it[0])] ||= []) << it }
      res = begin
        @store.set_batch(g)
      rescue StandardError => e
        g.to_h { |n, _| [n, StoreError.new(n, e.message)] }
      end
      ok = true
      g.each do |n, its|
        if res[n].is_a?(StoreError)
          ok = false
          count(:write_errors, its.length)
          report(:set, its.first[0], res[n])
        else
          count(:writes, its.length)
          count(:bytes_written, its.sum { |it| it[1].bytesize })
        end
      end
      ok && items.length == given
    end

    # { key => handle | false }, plus the keys whose lease read failed.
    def try_leases(keys, placeholder)
      won = {}
      failed = []
      return [won, failed] if keys.empty?

      per_node(group_keys(keys), :lease, ->(g) { @store.try_lease(g, placeholder, @lease_ttl_ms) }) do |ks, r|
        if r.is_a?(StoreError)
          failed.concat(ks)
        else
          ks.each_with_index { |k, i| won[k] = r[i] }
        end
      end
      [won, failed]
    end

    # The lease protocol of Go's and Node's caches (docs/leases.md).
    def lease_load(keys, no_write, held_at_read, prev, ttl, neg, block, won_at_read = {})
      res = {}
      placeholder = Codec.encode_lease(SecureRandom.random_bytes(16))
      held_set = held_at_read.to_h { |k| [k, true] }
      candidates = keys.reject { |k| won_at_read.key?(k) || no_write[k] || prev.key?(k) || held_set.key?(k) }
      tried, failed = try_leases(candidates, placeholder)
      won = won_at_read.dup
      held = held_at_read.dup
      tried.each { |k, h| h ? won[k] = h : held << k }
      prev.each { |k, b| won[k] = { prev: b } }
      open = keys.select { |k| no_write[k] } + failed
      count(:lease_waits, held.length)
      deadline = mono + @o[:lease_wait]
      delay = 0.001
      until held.empty?
        left = deadline - mono
        if left <= 0
          count(:lease_fail_open, held.length)
          open.concat(held)
          break
        end
        sleep [delay, left].min
        delay = [delay * 2, 0.02].min
        raw = read_raw(held)
        still = []
        absent = []
        held.each do |k|
          kind, v = classify(k, raw[k])
          case kind
          when :hit then res[k] = v
          when :absent then res[k] = nil
          when :held then still << k
          when :miss then absent << k
          else open << k
          end
        end
        held = still
        next if absent.empty?

        again, fails = try_leases(absent, placeholder)
        open.concat(fails)
        again.each { |k, h| h ? won[k] = h : held << k }
      end
      to_load = won.keys + open
      return res if to_load.empty?

      # A block that leaves by any way but returning (an error, throw,
      # Timeout.timeout, Thread#kill) gives its leases back, so the next
      # caller loads at once instead of waiting lease_wait in vain.
      loaded = false
      begin
        got, cost = call_block(to_load, block)
        loaded = true
      ensure
        release_leases(won.reject { |_, h| h.is_a?(Hash) }) unless loaded
      end
      written = now_ms
      fills = []
      unfilled = {}
      to_load.each do |k|
        v = got[k]
        res[k] = v
        next unless won.key?(k)

        if v.nil?
          t = jitter(neg)
          b = neg.positive? ? @codec.encode_negative : nil
        else
          t = jitter(ttl || @o[:ttl])
          b = encode_value(k, v, written, t)
        end
        if b
          fills << [k, b, t, won[k]]
        elsif !won[k].is_a?(Hash)
          unfilled[k] = won[k]
        end
      end
      fill_leases(fills, cost)
      release_leases(unfilled)
      res
    end

    def fill_leases(items, _cost)
      return if items.empty?

      g = {}
      items.each { |it| (g[node_of(it[0])] ||= []) << it }
      res = begin
        @store.fill(g)
      rescue StandardError => e
        g.to_h { |n, _| [n, StoreError.new(n, e.message)] }
      end
      g.each do |n, its|
        r = res[n]
        if r.is_a?(StoreError) || r.nil?
          count(:write_errors, its.length)
          report(:set, its.first[0], r || StoreError.new(n, 'no answer'))
          next
        end
        its.each_with_index do |it, i|
          if r[i]
            count(:writes)
            count(:bytes_written, it[1].bytesize)
          else
            count(:lease_fills_lost)
          end
        end
      end
    end

    def release_leases(handles)
      return if handles.empty?

      g = {}
      handles.each { |k, h| (g[node_of(k)] ||= []) << [k, h] }
      @store.release(g)
    rescue StandardError => e
      report(:release, handles.keys.first, e)
    end
  end
end
