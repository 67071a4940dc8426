# frozen_string_literal: true

require 'socket'
require 'base64'
require 'digest'
require_relative 'errors'
require_relative 'ring'

module Kura
  # A memcached meta-protocol client (mg, ms, md, ma, mn) and store, with
  # the same key forms, flags and lease mechanism as Go's store/memcache
  # and Node's MemcacheStore (dalli 3.0 speaks only the binary protocol,
  # which has no leases):
  #
  # - a key of 1 to 250 bytes with no space, control byte or DEL is sent as
  #   is; another of at most 186 bytes (not starting with NUL) base64 with
  #   the b flag; a longer one as 0x00 + its first 100 bytes + SHA-256, base64;
  # - a batch is one quiet pipeline per server ended by mn, written to
  #   every server before any answer is read: one round trip in all;
  # - the parser trusts no byte (line length, value length, CRLF).
  module Memcache
    MAX_KEY_LEN = 250
    MAX_BASE64_RAW = 186
    HASHED_PREFIX_LEN = 100
    MAX_LINE = 8 << 10
    MAX_TTL_DELTA = 30 * 24 * 60 * 60

    # A malformed answer: the connection is dropped.
    class ProtocolError < Kura::Error; end

    # An error line (ERROR, CLIENT_ERROR, SERVER_ERROR) for a request.
    class ServerError < Kura::Error
      attr_reader :status

      def initialize(status, text)
        @status = status
        super("memcached answered #{status} #{text}".strip)
      end
    end

    # One answer: status is "HD", "VA", "EN", "NF", "NS", "EX" or "MN".
    Response = Struct.new(:status, :value, :opaque, :cas, :won, :already_won, :stale) do
      # An empty item a lease (mg N) created that no fill has replaced yet.
      def placeholder?
        status == 'VA' && value.to_s.empty? && (won || already_won || stale)
      end
    end

    module_function

    # The wire token of key and whether it needs the b flag.
    PLAIN_KEY = /\A[\x21-\x7e]{1,250}\z/.freeze

    # A key sent as it is (printable ASCII, no space, 1 to 250 bytes).
    def plain_key?(key)
      key.is_a?(String) && key.ascii_only? && key.match?(PLAIN_KEY)
    end

    def wire_key(key)
      key = key.to_s
      # the common case: printable ASCII, no space, at most 250 bytes
      return [key, false] if key.ascii_only? && key.match?(PLAIN_KEY)

      raw = key.b
      raise ArgumentError, 'kura: memcache: empty key (memcached keys are 1 to 250 bytes)' if raw.empty?

      if raw.bytesize <= MAX_KEY_LEN && raw !~ /[\x00-\x20\x7f]/n
        [raw, false]
      elsif raw.bytesize <= MAX_BASE64_RAW && raw.getbyte(0) != 0
        [Base64.strict_encode64(raw), true]
      else
        hashed = "\x00".b + raw.byteslice(0, HASHED_PREFIX_LEN) + Digest::SHA256.digest(raw)
        [Base64.strict_encode64(hashed), true]
      end
    end

    # A TTL in ms as memcached's T flag: whole seconds rounded up; beyond 30 days an absolute time.
    def ttl_seconds(ms, now = Time.now.to_i)
      return 0 unless ms&.positive?

      secs = (ms / 1000.0).ceil
      return secs if secs <= MAX_TTL_DELTA

      abs = now + secs
      # memcached 1.6 parses T into a signed 32-bit int: a time past
      # 2038-01-19 is stored and expires at once (HD, then EN). Such a TTL
      # is "no expiry" here.
      abs > 0x7FFF_FFFF ? 0 : abs
    end

    # The wire form of one request (a Hash: cmd:, key:, value:, v:, c:, t:/ttl:, C:, N:, I:, M:, D:, J:, q:).
    def encode(r, opaque = 0, quiet = r[:quiet])
      return +"mn\r\n" if r[:cmd] == 'mn'

      token, b64 = wire_key(r[:key])
      line = +"#{r[:cmd]} #{token}"
      line << " #{r[:value].bytesize}" if r[:cmd] == 'ms'
      line << ' b' if b64
      line << ' v' if r[:v]
      line << ' c' if r[:c]
      line << ' I' if r[:invalidate]
      line << " T#{r[:ttl]}" if r[:ttl]
      line << " C#{r[:cas]}" if r[:cas]&.positive?
      line << " N#{r[:vivify]}" if r[:vivify]&.positive?
      line << " M#{r[:mode]}" if r[:mode]
      line << " D#{r[:delta]}" if r[:delta]
      line << " J#{r[:initial]}" if r[:initial]
      line << ' q' if quiet
      line << " O#{opaque}" if opaque.positive?
      line << "\r\n"
      line = line.b
      line << r[:value].b << "\r\n" if r[:cmd] == 'ms'
      line
    end

    # A quiet pipeline built as bytes (ended by mn) and its request count:
    # the batch paths (reads, lease reads, write-backs, fills) write their
    # requests straight into one buffer per server, with no Hash per request.
    RawBatch = Struct.new(:bytes, :count)

    # Appends `mg <key> [b] <flags> q O<opaque>` (flags: " v", " v c N30", ...).
    def append_mg(out, key, flags, opaque)
      token = key
      b64 = false
      token, b64 = wire_key(key) unless plain_key?(key)
      out << 'mg ' << token
      out << ' b' if b64
      out << flags << ' q O' << opaque.to_s << "\r\n"
    end

    # Appends `ms <key> <len> [b] T<ttl> [C<cas>] q O<opaque>` and the value.
    def append_ms(out, key, value, ttl, cas, opaque)
      token = key
      b64 = false
      token, b64 = wire_key(key) unless plain_key?(key)
      value = value.b unless value.encoding == Encoding::BINARY
      out << 'ms ' << token << ' ' << value.bytesize.to_s
      out << ' b' if b64
      out << ' T' << ttl.to_s
      out << ' C' << cas.to_s if cas&.positive?
      out << ' q O' << opaque.to_s << "\r\n" << value << "\r\n"
    end

    # One connection to one server: requests are written, then their
    # answers read, in order. Any failure closes it; the next use redials.
    class Connection
      attr_reader :addr

      def initialize(addr, connect_timeout: 1.0, read_timeout: 1.0, max_value: 64 << 20)
        @addr = addr
        host, port = Memcache.split_addr(addr)
        @host = host
        @port = port
        @connect_timeout = connect_timeout
        @read_timeout = read_timeout
        @max_value = max_value
        @sock = nil
        @buf = +''.b
        @pos = 0
      end

      def close
        @sock&.close
      rescue IOError
        nil
      ensure
        @sock = nil
        @buf = +''.b
        @pos = 0
      end

      def connected?
        !@sock.nil?
      end

      # Sends requests (a quiet pipeline ended by mn when quiet); returns
      # the count needed by #finish. Raises StoreError and closes on failure.
      def start(reqs, quiet, deadline)
        sock = dial(deadline)
        out = +''.b
        if quiet
          reqs.each_with_index { |r, i| out << Memcache.encode(r, i + 1, true) }
          out << "mn\r\n"
        else
          reqs.each { |r| out << Memcache.encode(r) }
        end
        write_all(sock, out, deadline)
      rescue SystemCallError, IOError, SocketError => e
        close
        raise StoreError.new(@addr, "#{e.class}: #{e.message}")
      end

      # Sends a RawBatch's bytes (a quiet pipeline ended by mn).
      def start_raw(bytes, deadline)
        write_all(dial(deadline), bytes, deadline)
      rescue SystemCallError, IOError, SocketError => e
        close
        raise StoreError.new(@addr, "#{e.class}: #{e.message}")
      end

      # Reads the answers of a pipeline sent by #start: an Array with, per
      # request, a Response, a ServerError, or nil (a quiet request that
      # had nothing to say).
      def finish(n, quiet, deadline)
        out = Array.new(n)
        if quiet
          loop do
            r = read_response(deadline)
            if r.is_a?(ServerError)
              # An error line carries no O token: fail every request it could be.
              out.map! { |o| o.nil? ? r : o }
              next
            end
            break if r.status == 'MN'

            i = r.opaque - 1
            raise ProtocolError, "answer for unknown opaque #{r.opaque}" if i.negative? || i >= n

            out[i] = r
          end
        else
          n.times { |i| out[i] = read_response(deadline) }
        end
        if @pos == @buf.bytesize
          @buf = +''.b
          @pos = 0
        end
        out
      rescue ProtocolError => e
        close
        raise StoreError.new(@addr, "protocol: #{e.message}")
      rescue SystemCallError, IOError, SocketError => e
        close
        raise StoreError.new(@addr, "#{e.class}: #{e.message}")
      end

      def exec(reqs, quiet, deadline)
        start(reqs, quiet, deadline)
        finish(reqs.length, quiet, deadline)
      end

      private

      def dial(deadline)
        return @sock if @sock

        left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
        raise StoreError.new(@addr, 'timed out before connecting') if left <= 0

        @sock = Socket.tcp(@host, @port, connect_timeout: [left, @connect_timeout].min)
        @sock.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1)
        @sock.sync = true
        @buf = +''.b
        @pos = 0
        @sock
      rescue Errno::ETIMEDOUT
        raise StoreError.new(@addr, 'connect timed out')
      end

      def write_all(sock, data, deadline)
        until data.empty?
          begin
            n = sock.write_nonblock(data, exception: false)
          rescue IOError, SystemCallError => e
            close
            raise StoreError.new(@addr, "write: #{e.message}")
          end
          if n == :wait_writable
            wait(sock, :wait_writable, deadline)
            next
          end
          data = data.byteslice(n, data.bytesize - n)
        end
      end

      def wait(sock, how, deadline)
        left = [deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC), @read_timeout].min
        return if left.positive? && sock.public_send(how, left)

        close
        raise StoreError.new(@addr, 'timed out')
      end

      # Reads more bytes; what was parsed (before @pos) is dropped first.
      def fill(deadline)
        if @pos.positive?
          @buf = @buf.byteslice(@pos, @buf.bytesize - @pos)
          @pos = 0
        end
        chunk = @sock.read_nonblock(65_536, exception: false)
        case chunk
        when :wait_readable then wait(@sock, :wait_readable, deadline)
        when nil then raise IOError, 'connection closed by the server'
        else @buf << chunk
        end
      end

      # The next line (without CRLF); the buffer is read from @pos on, not
      # sliced per line (5,000 answers of a batch are one buffer).
      def read_line(deadline)
        loop do
          nl = @buf.index("\n", @pos)
          if nl
            len = nl - @pos
            raise ProtocolError, 'response line longer than 8 KiB' if len > MAX_LINE
            raise ProtocolError, 'response line not ended by CRLF' if len.zero? || @buf.getbyte(nl - 1) != 13

            line = @buf.byteslice(@pos, len - 1)
            @pos = nl + 1
            return line
          end
          raise ProtocolError, 'response line longer than 8 KiB' if @buf.bytesize - @pos > MAX_LINE

          fill(deadline)
        end
      end

      STATUSES = %w[HD VA EN NF NS EX MN].to_h { |c| [c, c.freeze] }.freeze
      ERRORS = %w[ERROR CLIENT_ERROR SERVER_ERROR].freeze
      DIGITS = /\A\d{1,20}\z/.freeze
      private_constant :STATUSES, :ERRORS, :DIGITS

      def read_response(deadline)
        line = read_line(deadline)
        flags = line.split(' ')
        code = flags[0]
        status = STATUSES[code]
        unless status
          return ServerError.new(code, flags.drop(1).join(' ')) if ERRORS.include?(code)

          raise ProtocolError, "unknown response #{line[0, 64].inspect}"
        end

        r = Response.new(status, nil, 0, nil, false, false, false)
        i = 1
        if status == 'VA'
          len = flags[1]
          raise ProtocolError, "bad VA length #{len.inspect}" unless len&.match?(/\A\d{1,10}\z/)

          len = len.to_i
          raise ProtocolError, "value of #{len} bytes over the #{@max_value}-byte limit" if len > @max_value

          fill(deadline) while @buf.bytesize - @pos < len + 2
          raise ProtocolError, 'data block not ended by CRLF' unless @buf.getbyte(@pos + len) == 13 && @buf.getbyte(@pos + len + 1) == 10

          r.value = @buf.byteslice(@pos, len)
          @pos += len + 2
          i = 2
        end
        n = flags.length
        while i < n
          f = flags[i]
          i += 1
          case f.getbyte(0)
          when 79 then r.opaque = digits(f, 0xFFFF_FFFF) # O
          when 99 then r.cas = digits(f, 0xFFFF_FFFF_FFFF_FFFF) # c
          when 87 then r.won = true # W
          when 90 then r.already_won = true # Z
          when 88 then r.stale = true # X
          end
        end
        r
      end

      def digits(f, max)
        arg = f.byteslice(1, f.bytesize - 1)
        raise ProtocolError, "bad flag #{f[0, 64].inspect}" unless arg.match?(DIGITS) && arg.to_i <= max

        arg.to_i
      end
    end

    def split_addr(addr)
      if addr.include?('@') || addr.include?('/')
        # a dalli-style URL: its password must not reach a host lookup or a message
        shown = addr.sub(/\A.*@/m, '[redacted]@')
        raise ArgumentError, "kura: memcache: server #{shown.inspect} is not host:port " \
                             "(memcached's meta protocol has no credentials)"
      end
      i = addr.rindex(':')
      raise ArgumentError, "kura: memcache: server #{addr.inspect} is not host:port" if i.nil? || i.zero?

      port = Integer(addr[(i + 1)..], exception: false)
      raise ArgumentError, "kura: memcache: server #{addr.inspect} has a bad port" unless port&.between?(1, 65_535)

      [addr[0...i].delete_prefix('[').delete_suffix(']'), port]
    end
  end
end
