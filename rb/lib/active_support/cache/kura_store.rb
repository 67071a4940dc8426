# frozen_string_literal: true

require 'active_support'
require 'active_support/cache'
require 'kura'

module ActiveSupport
  module Cache
    # A Rails cache store on kura (config.cache_store = :kura_store, ...):
    # values in kura's envelope, so Go and Node services read what Rails
    # writes and the reverse; memcached through kura's meta-protocol
    # client (leases, one pipeline per server) or Redis; the Go rings.
    #
    #   config.cache_store = :kura_store, %w[10.0.0.1:11211 10.0.0.2:11211], { ring: :dalli, namespace: 'app' }
    #   config.cache_store = :kura_store, { redis: 'redis://localhost:6379/0', expires_in: 1.hour }
    #
    # Options: ring: (:ketama, the Go store's default, or :dalli to keep a
    # dalli fleet's placement), redis: / redis_urls: (a server, or shards
    # placed as Redis::Distributed places them), leases: (true: a cold
    # key's block runs once across processes and languages), timeout:
    # (seconds per store call), compress: (false stores payloads
    # uncompressed), compress_threshold: (bytes, default 1 KiB), codec:,
    # and Rails' namespace:, expires_in:, version:, race_condition_ttl:
    # (accepted; leases make it moot: one caller reloads, the others wait
    # for its fill instead of reading a stale entry).
    #
    # Values: Hashes, Arrays, Strings, numbers, true/false/nil and Times
    # follow kura's one rule (docs/ruby.md), so Go and Node read them (a
    # Hash's keys come back as Strings, Symbols as Strings). Any other
    # object (an ActiveRecord model, a Struct) is kept with Marshal under
    # serializer 128, so it reads back as itself, and Go and Node read it
    # as a miss; objects: :attributes stores models and Structs as maps of
    # their fields instead (Go and Node read them; Ruby reads a Hash back).
    # Entries with a cache version are a map {"_kura_rails" => 1, "value",
    # "version"}.
    class KuraStore < Store
      WRAPPER = '_kura_rails'

      attr_reader :kura

      def self.supports_cache_versioning?
        true
      end

      def initialize(*addresses, **options)
        addresses = addresses.flatten
        opts = options.dup
        redis = opts.delete(:redis)
        redis_urls = opts.delete(:redis_urls)
        # RedisCacheStore's url: (a URL, or an Array of URLs for shards);
        # ignored, it sent a Redis user's cache to memcached on localhost.
        url = opts.delete(:url)
        if url && (redis || redis_urls)
          raise ArgumentError, 'kura_store: give one of url:, redis:, redis_urls:'
        elsif url.is_a?(Array)
          redis_urls = url
        elsif url
          redis = url
        end
        unless redis.nil? || redis.is_a?(String)
          raise ArgumentError, "kura_store: redis: takes a URL String, not a #{redis.class} (kura opens its own connections)"
        end
        ring = opts.delete(:ring) || :ketama
        timeout = opts.delete(:timeout) || 0.25
        leases = opts.key?(:leases) ? opts.delete(:leases) : true
        codec = opts.delete(:codec)
        objects = opts.delete(:objects) || :marshal
        super(opts)
        # Rails' Entry compresses by Marshal-dumping the value (on every
        # write, and on every Entry.new a read makes); kura's codec
        # compresses the envelope instead.
        @options[:compress] = false
        @store = if redis || redis_urls
                   Kura::RedisStore.new(url: redis, urls: redis_urls, timeout: timeout)
                 else
                   Kura::MemcacheStore.new(addresses.empty? ? ['127.0.0.1:11211'] : addresses, ring: ring, timeout: timeout)
                 end
        compress = opts.fetch(:compress, true)
        @codec = codec || Kura::Codec.new(compressor: compress ? :s2 : :none, marshal_fallback: true, compact: true, objects: objects,
                                          min_compress_size: compress ? opts.fetch(:compress_threshold, 1024).to_i : 0)
        @kura = Kura::Cache.new(@store, codec: @codec, leases: leases, ttl_jitter: 0, negative_ttl: 0)
        @redis = !redis.nil? || !redis_urls.nil?
      end

      # A cold key's block runs once across processes (leases) when no
      # version, force or skip_nil is asked for; otherwise Rails' own fetch.
      def fetch(name, options = nil, &block)
        opts = merged_options(options)
        # raw: a counter's digits, which kura's fetch would take for a value
        # to replace; Rails' fetch reads them through read_entry.
        return super if block.nil? || opts[:force] || opts[:version] || opts[:skip_nil] || opts[:raw] ||
                        name.respond_to?(:cache_version) || expired_at_once?(opts)

        key = normalize_key(name, opts)
        instrument(:read, name, opts) do |payload|
          hit = true
          ttl = (opts[:expires_in] || 0).to_f
          # nil is cached as Rails caches it: as long as a value would be
          v = @kura.fetch(key, ttl: ttl, negative_ttl: ttl.positive? ? ttl : 30 * 86_400) do
            hit = false
            instrument(:generate, name, opts) { block.call(name) }
          end
          payload[:super_operation] = :fetch
          payload[:hit] = hit
          # an entry written with a version, fetched without one: its value
          hit && v.is_a?(Hash) && v[WRAPPER] == 1 ? v['value'] : v
        end
      end

      def increment(name, amount = 1, options = nil)
        counter(name, amount, options)
      end

      def decrement(name, amount = 1, options = nil)
        counter(name, -amount, options)
      end

      # Redis: SCAN + DEL of the matching keys (namespaced); memcached cannot.
      def delete_matched(matcher, options = nil)
        raise NotImplementedError, 'kura_store: delete_matched needs Redis (memcached cannot list keys)' unless @redis

        opts = merged_options(options)
        instrument :delete_matched, matcher do
          pattern = namespace_key(matcher.is_a?(Regexp) ? '*' : matcher, opts)
          @store.nodes.each do |n|
            c = @store.client(n)
            cursor = '0'
            loop do
              cursor, keys = c.scan(cursor, match: pattern, count: 1000)
              keys = keys.select { |k| k.match?(matcher) } if matcher.is_a?(Regexp)
              c.del(*keys) unless keys.empty?
              break if cursor == '0'
            end
          end
        end
      end

      # memcached: flush_all on every server; Redis: the namespace's keys, or FLUSHDB without one.
      def clear(options = nil)
        opts = merged_options(options)
        if @redis
          return delete_matched('*', opts) if opts[:namespace]

          @store.nodes.each { |n| @store.client(n).flushdb }
        else
          @store.nodes.each { |n| flush_memcached(n) }
        end
        true
      rescue StandardError
        false
      end

      def stats
        @kura.stats
      end

      private

      def flush_memcached(node)
        c = Kura::Memcache::Connection.new(node)
        r = c.exec([{ cmd: 'mn' }], false, Process.clock_gettime(Process::CLOCK_MONOTONIC) + 1)
        raise Kura::StoreError.new(node, 'no answer') unless r[0]

        s = TCPSocket.new(*Kura::Memcache.split_addr(node))
        s.write("flush_all\r\n")
        s.gets
        s.close
        c.close
      end

      def counter(name, amount, options)
        opts = merged_options(options)
        key = normalize_key(name, opts)
        instrument(amount.negative? ? :decrement : :increment, name, amount: amount.abs) do
          if @redis
            c = @store.client(@store.node_of(key))
            v = c.incrby(key, amount)
            c.expire(key, opts[:expires_in].to_i) if opts[:expires_in] && c.ttl(key).negative?
            v
          else
            memcached_counter(key, amount, opts)
          end
        end
      rescue StandardError
        nil
      end

      # As MemCacheStore: ma on the raw counter, created at 0 + amount if
      # absent (decrement floors at 0, as memcached does).
      def memcached_counter(key, amount, opts)
        node = @store.node_of(key)
        ttl = Kura::Memcache.ttl_seconds(ttl_ms(opts))
        req = { cmd: 'ma', key: key, v: true, mode: amount.negative? ? 'D' : 'I', delta: amount.abs,
                vivify: ttl.positive? ? ttl : 0, initial: amount.negative? ? 0 : amount }
        req[:vivify] = 2_592_000 if req[:vivify].zero?
        out = @store.send(:run, { node => [key] }, 0.25) { [req] }[node]
        return nil if out.is_a?(Kura::StoreError) || !out[0].is_a?(Kura::Memcache::Response) || out[0].status != 'VA'

        out[0].value.to_i
      end

      def read_entry(key, **_options)
        raw = @store.get_batch({ @store.node_of(key) => [key] }).values.first
        return nil if raw.is_a?(Kura::StoreError) || raw.nil?

        entry_of(raw[0])
      end

      def entry_of(bytes)
        return nil if bytes.nil?

        bytes = bytes.b
        return Entry.new(bytes, compress: false) if bytes.match?(/\A\d+\z/) # a raw counter (increment)

        e = @codec.decode(bytes)
        case e.kind
        when :negative then Entry.new(nil, compress: false)
        when :value
          v = e.value
          if v.is_a?(Hash) && v[WRAPPER] == 1
            Entry.new(v['value'], version: v['version'], compress: false)
          else
            Entry.new(v, compress: false)
          end
        end
      rescue Kura::Error
        nil
      end

      def payload_of(entry, raw = false)
        # raw: true stores the value's text, as MemCacheStore does (counters)
        return entry.value.to_s.b if raw && !entry.version && (entry.value.is_a?(Integer) || entry.value.is_a?(String))

        if entry.version
          @codec.encode({ WRAPPER => 1, 'value' => entry.value, 'version' => entry.version })
        elsif entry.value.nil?
          @codec.encode_negative
        else
          @codec.encode(entry.value, written: (Time.now.to_r * 1000).to_i)
        end
      end

      # A negative expires_in: Rails 6.1 reads such an entry as expired at
      # once (Entry#expired?, memcached's negative exptime); on the wire it
      # would be 0, "no expiry".
      def expired_at_once?(options)
        options[:expires_in] && options[:expires_in].to_f.negative?
      end

      def ttl_ms(options)
        ((options[:expires_in] || 0).to_f * 1000).round
      end

      def write_entry(key, entry, **options)
        write_multi_entries({ key => entry }, **options)
      end

      # One batch per server (Rails' default writes key by key).
      def write_multi_entries(hash, **options)
        return true if hash.empty?

        if expired_at_once?(options)
          groups = @store.group(hash.keys).transform_values { |idx| idx.map { |i| hash.keys[i] } }
          return @store.del_batch(groups).values.none? { |r| r.is_a?(Kura::StoreError) }
        end

        t = ttl_ms(options)
        unless_exist = options[:unless_exist]
        groups = {}
        hash.each do |k, entry|
          b = payload_of(entry, options[:raw])
          (groups[@store.node_of(k)] ||= []) << [k, b, t]
        end
        if unless_exist
          groups.all? do |n, items|
            items.all? { |k, b, tt| add(n, k, b, tt) }
          end
        else
          @store.set_batch(groups).values.none? { |r| r.is_a?(Kura::StoreError) }
        end
      rescue StandardError
        false
      end

      def add(node, key, bytes, ttl)
        if @redis
          @store.client(node).set(key, bytes, nx: true, px: ttl.positive? ? ttl : nil)
        else
          out = @store.send(:run, { node => [key] }, 0.25) do
            [{ cmd: 'ms', key: key, value: bytes, ttl: Kura::Memcache.ttl_seconds(ttl), mode: 'E' }]
          end[node]
          # quiet: no answer is HD (stored); NS means the key exists
          !out.is_a?(Kura::StoreError) && (out[0].nil? || (out[0].is_a?(Kura::Memcache::Response) && out[0].status == 'HD'))
        end
      end

      # One read per server.
      def read_multi_entries(names, **options)
        keys = names.map { |n| normalize_key(n, options) }
        raw = {}
        groups = @store.group(keys).transform_values { |idx| idx.map { |i| keys[i] } }
        @store.get_batch(groups).each do |n, r|
          next if r.is_a?(Kura::StoreError)

          groups[n].each_with_index { |k, i| raw[k] = r[i] }
        end
        names.each_with_index.each_with_object({}) do |(name, i), out|
          entry = entry_of(raw[keys[i]])
          next unless entry && !entry.expired?
          next if entry.mismatched?(normalize_version(name, options))

          out[name] = entry.value
        end
      end

      def delete_entry(key, **_options)
        r = @store.del_batch({ @store.node_of(key) => [key] }).values.first
        !r.is_a?(Kura::StoreError)
      end
    end
  end
end
