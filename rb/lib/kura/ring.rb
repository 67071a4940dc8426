# frozen_string_literal: true

require 'digest'
require 'zlib'

module Kura
  # Client-side rings, each placing every key where the Go store (package
  # ring, docs/rings.md) and its peer place it:
  #
  # - Ring::Ketama: the Go memcached store's default (libketama with each
  #   server's "host:port"), which the Node package uses too;
  # - Ring::Dalli: dalli's Dalli::Ring (Rails' :mem_cache_store);
  # - Ring::Distributed: redis-rb's Redis::Distributed (Redis::HashRing).
  #
  # #index(key) is the position of the owner in the servers given.
  module Ring
    # A sorted circle of [point, owner] pairs; equal points keep insertion order.
    class Continuum
      def initialize(pts)
        sorted = pts.each_with_index.sort_by { |(v, _), i| [v, i] }.map(&:first)
        @points = sorted.map(&:first)
        @owners = sorted.map(&:last)
        # The first point at or above each 2^20-wide bucket of the 32-bit
        # circle: ceil starts there and steps (a few points at most)
        # instead of a binary search with a Ruby block per step.
        n = @points.length
        @start = Array.new(BUCKETS) { |b| @points.bsearch_index { |p| p >= (b << BUCKET_SHIFT) } || n }
      end

      BUCKETS = 4096
      BUCKET_SHIFT = 20

      # The owner of the first point at or after h, wrapping to the first.
      def ceil(h)
        if h >= 0 && h <= 0xFFFF_FFFF
          i = @start[h >> BUCKET_SHIFT]
          pts = @points
          n = pts.length
          i += 1 while i < n && pts[i] < h
          return @owners[i == n ? 0 : i]
        end
        i = @points.bsearch_index { |p| p >= h } || 0
        @owners[i]
      end

      # The owner of the last point at or before h, wrapping to the last.
      def floor(h)
        i = @points.bsearch_index { |p| p > h } || @points.length
        i = @points.length if i.zero?
        @owners[i - 1]
      end
    end

    def self.f32(x)
      [x].pack('e').unpack1('e')
    end

    def self.check(servers, weights)
      raise ArgumentError, 'kura: ring: no servers' if servers.empty?
      raise ArgumentError, "kura: ring: #{weights.length} weights for #{servers.length} servers" if weights.length != servers.length

      seen = {}
      servers.each_with_index do |s, i|
        raise ArgumentError, "kura: ring: servers[#{i}] is empty" if s.to_s.empty?
        raise ArgumentError, "kura: ring: server #{s} listed twice" if seen[s]

        seen[s] = true
        w = weights[i]
        raise ArgumentError, "kura: ring: servers[#{i}] has weight #{w} (want 1 to #{1 << 20})" unless w.is_a?(Integer) && w.positive? && w <= (1 << 20)
      end
    end

    # What every ring shares: its servers (checked, as Strings) and the
    # owner of a key; a ring defines #index(key).
    class Base
      attr_reader :servers

      def server(key)
        @servers[index(key)]
      end

      private

      # Checks servers and weights (each 1 when nil), keeps the servers;
      # returns the weights.
      def take(servers, weights)
        weights ||= [1] * servers.length
        Ring.check(servers, weights)
        @servers = servers.map(&:to_s).freeze
        weights
      end
    end

    # libketama over "host:port" (Go store/memcache's default ring, Node's KetamaRing).
    class Ketama < Base
      def initialize(servers, weights: nil)
        weights = take(servers, weights)
        total = weights.sum
        n = Ring.f32(servers.length.to_f)
        pts = []
        @servers.each_with_index do |id, owner|
          pct = Ring.f32(Ring.f32(weights[owner].to_f) / Ring.f32(total.to_f))
          digests = (Ring.f32(Ring.f32(Ring.f32(pct * 160) / 4) * n) + 0.0000000001).floor
          digests.times do |k|
            d = Digest::MD5.digest("#{id}-#{k}")
            d.unpack('V4').each { |v| pts << [v, owner] }
          end
        end
        @c = Continuum.new(pts)
      end

      def index(key)
        @c.ceil(Digest::MD5.digest(key.to_s).unpack1('V'))
      end
    end

    # dalli 3.x's ring: floor(n*160*w/W) points SHA1("host:port:k")[0,4]
    # big-endian per server, CRC-32 of the key, last point at or before it.
    class Dalli < Base
      def initialize(servers, weights: nil)
        weights = take(servers, weights)
        return if servers.length == 1

        total = weights.sum
        pts = []
        @servers.each_with_index do |id, owner|
          count = ((servers.length * 160 * weights[owner]).to_f / total).floor
          count.times { |k| pts << [Digest::SHA1.digest("#{id}:#{k}").unpack1('N'), owner] }
        end
        @c = Continuum.new(pts)
      end

      def index(key)
        return 0 unless @c

        key = key.to_s
        key = Dalli.dalli_key(key) if key.bytesize > 250
        @c.floor(Zlib.crc32(key.b))
      end

      # The key dalli's KeyManager sends for a key over 250 characters.
      def self.dalli_key(key)
        chars = key.valid_encoding? ? key.length : key.bytesize
        return key if chars <= 250

        prefix = 249 - (5 + 32)
        head = key.valid_encoding? ? key[0, prefix] : key.b.byteslice(0, prefix)
        "#{head}:md5:#{Digest::MD5.hexdigest(key.b)}"
      end
    end

    # redis-rb 4.x's Redis::HashRing: 160 points CRC-32("id:k") per node,
    # the node added later owning collisions; the key's {tag} when it opens
    # the key (or a line of it).
    class Distributed < Base
      def initialize(ids)
        take(ids, nil)
        pts = []
        @servers.each_with_index do |id, owner|
          160.times { |k| pts << [Zlib.crc32("#{id}:#{k}"), owner] }
        end
        @c = Continuum.new(pts)
      end

      def index(key)
        key = key.to_s
        if (m = key.match(/^\{(.+?)\}/))
          key = m[1]
        end
        @c.floor(Zlib.crc32(key.b))
      end

      # redis-rb's default node id: "redis://host:port/db".
      def self.id(host, port, db = 0)
        "redis://#{host}:#{port}/#{db}"
      end
    end
  end
end
