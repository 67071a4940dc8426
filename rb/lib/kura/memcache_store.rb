# frozen_string_literal: true

require_relative 'memcache'
require_relative 'store'
require_relative 'ring'

module Kura
  # A pool of memcached servers over the meta protocol, keys placed by the
  # Go store's ring (ketama over "host:port"; ring: :dalli for a Rails
  # fleet on dalli's placement). Thread-safe: each thread checks a
  # connection per server out of a small pool; after fork the pools are
  # dropped (the parent's sockets are never used by the child).
  #
  # Leases are memcached's own (docs/leases.md): `mg <key> v c N<ttl>` wins
  # (W) for exactly one caller in any process and language, the fill is
  # `ms <key> C<cas>`, a release `md <key> C<cas>`, an invalidation `md`.
  class MemcacheStore < Store
    attr_reader :ring

    # servers: ["host:port", ...]; weights: [Integer]; ring: :ketama (Go's
    # and Node's default) or :dalli; timeout: seconds per store call (the
    # budget); health: true, false or {threshold:, interval:}.
    def initialize(servers, weights: nil, ring: :ketama, timeout: 0.25, connect_timeout: 1.0,
                   pool_size: 8, health: true, max_value: 64 << 20)
      raise ArgumentError, 'kura: memcache: no servers' if servers.nil? || servers.empty?

      servers = servers.map(&:to_s)
      servers.each { |s| Memcache.split_addr(s) }
      @ring = case ring
              when :ketama, nil then Kura::Ring::Ketama.new(servers, weights: weights)
              when :dalli then Kura::Ring::Dalli.new(servers, weights: weights)
              else raise ArgumentError, "kura: memcache: ring #{ring.inspect} (want :ketama or :dalli)"
              end
      @servers = servers.freeze
      @timeout = timeout
      @connect_timeout = connect_timeout
      @pool_size = pool_size
      @max_value = max_value
      reset_pools
      setup_health(health)
    end

    def node_of(key)
      @servers[@ring.index(key)]
    end

    def nodes
      @servers.dup
    end

    def leases?
      true
    end

    # Pipelines sent per server since start ({node => count}): a batch is one
    # round trip per server it touches.
    def round_trips
      @lock.synchronize { @trips.dup }
    end

    # {node => [String|nil]}: lease placeholders and stale items read as absent.
    def get_batch(groups, timeout: @timeout)
      run(groups, timeout) { |keys| raw_mg(keys, ' v') }
        .transform_values do |out|
          next out if out.is_a?(StoreError)

          out.map do |r|
            next nil if r.nil? || r.is_a?(ServerError) || r.status != 'VA' || r.placeholder? || r.stale

            r.value
          end
        end
    end

    # The keys a reserved key (a published dictionary) is stored under: one
    # per server, key + "#n" for the smallest n the ring places there (Go's
    # store/memcache NodeKeys).
    def node_keys(key)
      keys = {}
      n = @servers.length
      i = 0
      while keys.length < n && i < (64 * n) + 1024
        k = "#{key}##{i}"
        keys[node_of(k)] ||= k
        i += 1
      end
      keys.values
    end

    # The read of a leased fetch, as Go's LeaseGet: `mg <key> v c N<ttl>`
    # on every key, so the read takes the lease on each miss in the same
    # round trip. {node => [[:value, bytes] | [:won, cas] | [:held] | [:miss]] | StoreError}
    def read_lease(groups, ttl_ms, timeout: @timeout)
      secs = [1, Memcache.ttl_seconds(ttl_ms)].max
      flags = " v c N#{secs}"
      run(groups, timeout) { |keys| raw_mg(keys, flags) }
        .transform_values do |out|
          next out if out.is_a?(StoreError)

          out.map do |r|
            next [:miss] unless r.is_a?(Response) && r.status == 'VA'

            if r.placeholder? || r.stale
              r.won && r.cas ? [:won, r.cas] : [:held]
            else
              [:value, r.value]
            end
          end
        end
    end

    # groups: {node => [[key, bytes, ttl_ms], ...]} -> {node => nil | StoreError}
    def set_batch(groups, timeout: @timeout)
      now = Time.now.to_i
      run(groups, timeout) do |items|
        out = String.new(capacity: items.sum { |it| it[1].bytesize + 64 }, encoding: Encoding::BINARY)
        items.each_with_index { |(k, v, t), i| Memcache.append_ms(out, k, v, Memcache.ttl_seconds(t, now), nil, i + 1) }
        Memcache::RawBatch.new(out << "mn\r\n", items.length)
      end
        .transform_values { |out| out.is_a?(StoreError) ? out : first_error(out, %w[HD]) }
    end

    def del_batch(groups, timeout: @timeout)
      run(groups, timeout) { |keys| keys.map { |k| { cmd: 'md', key: k } } }
        .transform_values { |out| out.is_a?(StoreError) ? out : first_error(out, %w[HD NF]) }
    end

    # {node => [lease handle (the CAS) | false]}: true leases are won (W).
    # A key that reads as a value now (another caller filled it) is false.
    def try_lease(groups, _placeholder, ttl_ms, timeout: @timeout)
      secs = [1, Memcache.ttl_seconds(ttl_ms)].max
      run(groups, timeout) { |keys| keys.map { |k| { cmd: 'mg', key: k, v: true, c: true, vivify: secs } } }
        .transform_values do |out|
          next out if out.is_a?(StoreError)

          out.map { |r| r.is_a?(Response) && r.status == 'VA' && r.won && r.cas ? r.cas : false }
        end
    end

    # groups: {node => [[key, bytes, ttl_ms, handle]]}; handle is a CAS
    # from #try_lease, or {prev: bytes}: the fill lands only while those
    # bytes are still there (read with their CAS first). {node => [bool] | StoreError}
    def fill(groups, timeout: @timeout)
      deadline = now_mono + timeout
      prevs = groups.transform_values { |items| items.each_index.select { |i| items[i][3].is_a?(Hash) } }
      cas = groups.transform_values { |items| items.map { |it| it[3].is_a?(Integer) ? it[3] : nil } }
      need = prevs.reject { |_, idx| idx.empty? }
      unless need.empty?
        got = run(need.to_h { |n, idx| [n, idx.map { |i| groups[n][i][0] }] }, deadline - now_mono) do |keys|
          keys.map { |k| { cmd: 'mg', key: k, v: true, c: true } }
        end
        got.each do |n, out|
          next if out.is_a?(StoreError)

          need[n].each_with_index do |i, j|
            r = out[j]
            cas[n][i] = r.cas if r.is_a?(Response) && r.status == 'VA' && r.value == groups[n][i][3][:prev]
          end
        end
      end
      now = Time.now.to_i
      send = groups.to_h { |n, items| [n, items.each_index.select { |i| cas[n][i] }] }
      res = run_fill(groups, send, cas, now, deadline)
      groups.to_h do |n, items|
        out = res[n]
        next [n, out] if out.is_a?(StoreError)

        ok = Array.new(items.length, false)
        send[n].each_with_index { |i, j| ok[i] = out.nil? || out[j].nil? || (out[j].is_a?(Response) && out[j].status == 'HD') }
        [n, ok]
      end
    end

    # groups: {node => [[key, handle]]}: deletes the lease items still holding the CAS.
    def release(groups, timeout: @timeout)
      g = groups.transform_values { |items| items.select { |_, h| h.is_a?(Integer) } }.reject { |_, v| v.empty? }
      run(g, timeout) { |items| items.map { |k, c| { cmd: 'md', key: k, cas: c } } }
    end

    # Adds delta to a counter, created at delta (tests, tools).
    def incr(key, delta = 1, ttl_ms: 3_600_000)
      n = node_of(key)
      out = run({ n => [key] }, @timeout) do |ks|
        ks.map { |k| { cmd: 'ma', key: k, v: true, vivify: Memcache.ttl_seconds(ttl_ms), initial: delta, delta: delta } }
      end[n]
      raise out if out.is_a?(StoreError)
      raise StoreError.new(n, "unexpected answer to ma: #{out[0].inspect}") unless out[0].is_a?(Memcache::Response) && out[0].status == 'VA'

      out[0].value.to_i
    end

    # One probe (mn) on the prober's own connection to node.
    def probe(node)
      c = (@probe_conns ||= {})[node] ||= Memcache::Connection.new(node, connect_timeout: @connect_timeout, read_timeout: @timeout * 4)
      r = c.exec([{ cmd: 'mn' }], false, now_mono + [@timeout * 4, 1.0].max)
      raise StoreError.new(node, 'bad answer to mn') unless r[0].is_a?(Memcache::Response) && r[0].status == 'MN'
    end

    def close
      super
      @lock.synchronize { @pools.each_value { |p| p.each(&:close) }; @pools.clear }
    end

    private

    Response = Memcache::Response
    ServerError = Memcache::ServerError

    def run_fill(groups, send, cas, now, deadline)
      g = send.reject { |_, idx| idx.empty? }
      run(g, deadline - now_mono) do |idx, n|
        items = groups[n]
        out = String.new(capacity: idx.sum { |i| items[i][1].bytesize + 80 }, encoding: Encoding::BINARY)
        idx.each_with_index do |i, j|
          k, v, t, = items[i]
          Memcache.append_ms(out, k, v, Memcache.ttl_seconds(t, now), cas[n][i], j + 1)
        end
        Memcache::RawBatch.new(out << "mn\r\n", idx.length)
      end
    end

    # A quiet pipeline of mg requests with flags, as one buffer.
    def raw_mg(keys, flags)
      out = String.new(capacity: keys.length * (flags.length + 48), encoding: Encoding::BINARY)
      keys.each_with_index { |k, i| Memcache.append_mg(out, k, flags, i + 1) }
      Memcache::RawBatch.new(out << "mn\r\n", keys.length)
    end

    def now_mono
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end

    def first_error(out, ok)
      out.each do |r|
        next if r.nil?
        return StoreError.new('memcached', r.message) if r.is_a?(ServerError)
        return StoreError.new('memcached', "answered #{r.status}") unless ok.include?(r.status)
      end
      nil
    end

    def reset_pools
      @pid = Process.pid
      @lock = Mutex.new
      @pools = Hash.new { |h, k| h[k] = [] }
      @trips = Hash.new(0)
      @probe_conns = {}
    end

    def checkout(node)
      reset_pools if @pid != Process.pid
      @lock.synchronize { @pools[node].pop } ||
        Memcache::Connection.new(node, connect_timeout: @connect_timeout, read_timeout: @timeout, max_value: @max_value)
    end

    def checkin(node, conn)
      return unless conn.connected? && @pid == Process.pid

      @lock.synchronize do
        if @pools[node].length < @pool_size
          @pools[node] << conn
        else
          conn.close
        end
      end
    end

    # Sends each node's requests (a quiet pipeline when more than one),
    # then reads every node's answers: one round trip for all servers.
    def run(groups, timeout)
      deadline = now_mono + timeout
      started = {}
      out = {}
      up_groups(groups, out).each do |node, items|
        conn = checkout(node)
        begin
          reqs = yield(items, node)
          if reqs.is_a?(Memcache::RawBatch)
            conn.start_raw(reqs.bytes, deadline)
            n = reqs.count
            quiet = true
          else
            quiet = reqs.length > 1 || reqs.any? { |r| r[:cmd] == 'ms' || r[:cmd] == 'md' }
            conn.start(reqs, quiet, deadline)
            n = reqs.length
          end
          @lock.synchronize { @trips[node] += 1 }
          started[node] = [conn, n, quiet]
        rescue StoreError, ArgumentError => e
          out[node] = e.is_a?(StoreError) ? e : StoreError.new(node, e.message)
          conn.close
          @health&.failure(node) if e.is_a?(StoreError)
        end
      end
      started.each do |node, (conn, n, quiet)|
        out[node] = conn.finish(n, quiet, deadline)
        checkin(node, conn)
        @health&.success(node)
      rescue StoreError => e
        conn.close
        out[node] = e
        @health&.failure(node)
      end
      out
    end
  end
end
