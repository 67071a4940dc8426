# frozen_string_literal: true

require 'redis'
require_relative 'store'
require_relative 'ring'

module Kura
  # Redis behind one adapter over redis-rb 4.8 (Debian's ruby-redis): a
  # standalone server, client-side shards placed as Redis::Distributed
  # places them (the Go store's ring.Distributed), or a Redis Cluster (the
  # slot map from CLUSTER SLOTS, one connection and one pipeline per
  # master: redis-rb 4's cluster client refuses pipelines across slots).
  #
  # Keys are stored as they are, as Go's redisstore and Node's RedisStore
  # store them. Leases are Go's: a placeholder entry SET NX PX, a fill by
  # the same Lua script byte for byte, a release that removes only it.
  #
  # Not tested here (a current stack differs): redis-rb 5 moves Cluster to
  # the redis-clustering gem and drops Redis::Distributed's #node_for
  # signature changes; the adapter is the one place to change.
  class RedisStore < Store
    FILL_SCRIPT = <<~LUA
      if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
      if ARGV[3] == '0' then redis.call('SET', KEYS[1], ARGV[2]) else redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end
      return 1
    LUA
    RELEASE_SCRIPT = <<~LUA
      if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
      return redis.call('DEL', KEYS[1])
    LUA
    # Go's scripts start with a newline; Node's too ("\nif redis.call...").
    FILL = "\n#{FILL_SCRIPT.chomp}"
    RELEASE = "\n#{RELEASE_SCRIPT.chomp}"

    # url: one server; urls: shards placed by redis-rb's HashRing (node
    # ids are the URLs with their db, as redis-rb's); cluster: seed URLs.
    def initialize(url: nil, urls: nil, cluster: nil, timeout: 0.25, connect_timeout: 1.0, health: true, **redis_opts)
      raise ArgumentError, 'kura: RedisStore: give exactly one of url:, urls:, cluster:' unless [url, urls, cluster].compact.length == 1

      @timeout = timeout
      @connect_timeout = connect_timeout
      @redis_opts = redis_opts
      @cluster = cluster
      @urls = if url then [url]
              elsif urls then urls
              end
      @ids = @urls&.map { |u| Ring::Distributed.id(*parse(u)) }
      # The seeds' user info: the slot map's connection and each master's
      # are opened from "host:port", which dropped a password in the URL.
      @redis_opts = cluster_auth(cluster).merge(@redis_opts) if cluster
      @ring = Ring::Distributed.new(@ids) if @ids && @ids.length > 1
      reset
      load_slots if @cluster
      setup_health(health)
    end

    def nodes
      @cluster ? @slots.uniq : @ids.dup
    end

    # The nodes only: the URLs and options may hold a password.
    def inspect
      "#<#{self.class.name} #{@cluster ? 'cluster' : 'nodes'}=#{nodes.inspect}>"
    end
    alias to_s inspect

    # A URL with everything up to its last '@' (the user info) cut out.
    def self.redact(url)
      url.sub(%r{\A([a-z][a-z0-9+.-]*://)?.*@}im) { "#{Regexp.last_match(1)}[redacted]@" }
    end

    def node_of(key)
      return @slots[RedisStore.slot(key)] if @cluster
      return @ids[0] unless @ring

      @ids[@ring.index(key)]
    end

    def leases?
      true
    end

    # The keys a reserved key (a published dictionary) is stored under, as
    # Go's redisstore NodeKeys: the key itself on one server; on a Cluster
    # "{key#n}" for the smallest n each master owns. Shards: none known.
    def node_keys(key)
      return [key] if !@cluster && @ids.length == 1
      return [] unless @cluster

      keys = {}
      masters = @slots.uniq.sort
      n = 0
      while keys.length < masters.length && n < (64 * masters.length) + 1024
        k = "{#{key}##{n}}"
        keys[@slots[RedisStore.slot(k)]] ||= k
        n += 1
      end
      masters.filter_map { |m| keys[m] }
    end

    def get_batch(groups, timeout: @timeout)
      # A Cluster node refuses MGET across slots: one pipeline of GETs there.
      each_node(groups) { |c, keys| @cluster ? c.pipelined { |p| keys.each { |k| p.get(k) } } : c.mget(*keys) }
    end

    def set_batch(groups, timeout: @timeout)
      each_node(groups) do |c, items|
        c.pipelined do |p|
          items.each { |k, v, t| t&.positive? ? p.set(k, v, px: t) : p.set(k, v) }
        end
        nil
      end
    end

    def del_batch(groups, timeout: @timeout)
      each_node(groups) do |c, keys|
        @cluster ? c.pipelined { |p| keys.each { |k| p.del(k) } } : c.del(*keys)
        nil
      end
    end

    # {node => [placeholder | false]}: SET NX PX of the placeholder entry.
    def try_lease(groups, placeholder, ttl_ms, timeout: @timeout)
      each_node(groups) do |c, keys|
        c.pipelined { |p| keys.each { |k| p.set(k, placeholder, nx: true, px: [ttl_ms, 1].max) } }
         .map { |ok| ok ? placeholder : false }
      end
    end

    # groups: {node => [[key, bytes, ttl_ms, handle]]}; handle is the
    # placeholder bytes (or {prev: bytes}); lands only while they are there.
    def fill(groups, timeout: @timeout)
      each_node(groups) do |c, items|
        sha = script_sha(c, :fill)
        c.pipelined do |p|
          items.each do |k, v, t, h|
            ph = h.is_a?(Hash) ? h[:prev] : h
            p.evalsha(sha, keys: [k], argv: [ph, v, (t || 0).to_i.to_s])
          end
        end.map { |r| r == 1 }
      end
    end

    def release(groups, timeout: @timeout)
      each_node(groups) do |c, items|
        sha = script_sha(c, :release)
        c.pipelined { |p| items.each { |k, h| p.evalsha(sha, keys: [k], argv: [h]) if h.is_a?(String) } }
        nil
      end
    end

    def incr(key, delta = 1)
      client(node_of(key)).incrby(key, delta)
    end

    def probe(node)
      c = (@probe_clients ||= {})[node] ||= new_client(node)
      raise StoreError.new(node, 'bad answer to PING') unless c.ping == 'PONG'
    end

    # The redis-rb client of a node (for tests and tools).
    def client(node)
      reset if @pid != Process.pid
      @clients[node] ||= @lock.synchronize { @clients[node] || new_client(node) }
    end

    def close
      super
      @clients.each_value(&:close)
      @clients.clear
    end

    private

    # host, port, db of a URL. A URL that does not parse is refused with
    # its user info cut out: URI's own error quotes it whole, password and
    # all (a '#', '@' or space in a password makes it invalid).
    def parse(u)
      raise TypeError, "kura: RedisStore: a redis url is a String, got a #{u.class}" unless u.is_a?(String)

      uri = URI(u.include?('://') ? u : "redis://#{u}")
      raise URI::InvalidURIError, 'no host' if uri.host.nil? || uri.host.empty?

      [uri.host, uri.port || 6379, (uri.path.to_s.delete_prefix('/').then { |d| d.empty? ? 0 : Integer(d) })]
    rescue URI::Error, ArgumentError
      raise ArgumentError, "kura: RedisStore: redis url #{RedisStore.redact(u.to_s)} is not redis://[user:password@]host:port/db " \
                           '(percent-encode a password holding #, @, / or spaces)'
    end

    # {username:, password:} of the first seed URL that has them.
    def cluster_auth(seeds)
      seeds.each do |seed|
        parse(seed)
        uri = URI(seed.include?('://') ? seed : "redis://#{seed}")
        next unless uri.userinfo

        user = uri.user.to_s.empty? ? nil : URI::DEFAULT_PARSER.unescape(uri.user)
        pass = uri.password && URI::DEFAULT_PARSER.unescape(uri.password)
        return { username: user, password: pass }.compact
      end
      {}
    end

    def reset
      @pid = Process.pid
      @lock = Mutex.new
      @clients = {}
      @probe_clients = {}
      @shas = {}
    end

    def new_client(node)
      opts = { timeout: @timeout, connect_timeout: @connect_timeout, reconnect_attempts: 0 }.merge(@redis_opts)
      Redis.new(url: @cluster ? "redis://#{node}" : @urls[@ids.index(node)], **opts)
    end

    # The slot map of a Cluster (CLUSTER SLOTS from the first seed that
    # answers): the master "host:port" of each of the 16,384 slots. A
    # MOVED answer loads it again.
    def load_slots
      errs = []
      @cluster.each do |seed|
        host, port, = parse(seed)
        c = Redis.new(host: host, port: port, timeout: [@timeout, 1].max, connect_timeout: @connect_timeout, **@redis_opts)
        slots = Array.new(16_384)
        c.call(%w[CLUSTER SLOTS]).each do |from, to, master, *|
          (from..to).each { |i| slots[i] = "#{master[0]}:#{master[1]}" }
        end
        c.close
        raise Kura::Error, "kura: cluster #{seed}: slots without a master" if slots.include?(nil)

        @slots = slots
        return
      rescue Redis::BaseError, SystemCallError => e
        errs << "#{RedisStore.redact(seed)}: #{e.message}"
      end
      raise Kura::Error, "kura: no cluster seed answered CLUSTER SLOTS (#{errs.join('; ')})"
    end

    CRC16 = Array.new(256) do |i|
      crc = i << 8
      8.times { crc = (crc & 0x8000).zero? ? (crc << 1) : ((crc << 1) ^ 0x1021) }
      crc & 0xFFFF
    end.freeze

    # The Redis Cluster slot of key (CRC16/XMODEM of its {tag} or itself).
    def self.slot(key)
      key = key.to_s.b
      if (i = key.index('{')) && (j = key.index('}', i + 1)) && j > i + 1
        key = key.byteslice(i + 1, j - i - 1)
      end
      crc = 0
      key.each_byte { |b| crc = ((crc << 8) & 0xFFFF) ^ CRC16[((crc >> 8) ^ b) & 0xFF] }
      crc % 16_384
    end

    def reload_slots
      load_slots
    rescue Kura::Error
      nil
    end

    def script_sha(c, which)
      @shas[[c.object_id, which]] ||= c.script(:load, which == :fill ? FILL : RELEASE)
    end

    def each_node(groups)
      out = {}
      up_groups(groups, out).each do |node, items|
        begin
          out[node] = yield(client(node), items)
          @health&.success(node)
        rescue Redis::BaseError, SystemCallError, IOError => e
          out[node] = StoreError.new(node, "#{e.class}: #{e.message}")
          reload_slots if @cluster && e.message.start_with?('MOVED', 'ASK', 'CLUSTERDOWN')
          @health&.failure(node) if e.is_a?(Redis::BaseConnectionError) || !e.is_a?(Redis::CommandError)
        end
      end
      out
    end
  end
end
