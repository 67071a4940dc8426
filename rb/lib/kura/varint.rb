# frozen_string_literal: true

module Kura
  # Unsigned LEB128 varints, as Go's encoding/binary writes them.
  module Varint
    module_function

    # Reads a uvarint from b at i, not past stop: [value, next index], or
    # [nil, i] when the bytes end first. Raises :corrupt past 64 bits.
    def read(b, i, stop)
      x = 0
      shift = 0
      while i < stop
        c = b.getbyte(i)
        i += 1
        if shift == 63 && c > 1
          raise MalformedError.new(:corrupt, 'varint overflows 64 bits')
        end

        x |= (c & 0x7F) << shift
        return [x, i] if c < 0x80

        shift += 7
        raise MalformedError.new(:corrupt, 'varint overflows 64 bits') if shift > 63
      end
      [nil, i]
    end

    def write(out, x)
      while x >= 0x80
        out << ((x & 0x7F) | 0x80)
        x >>= 7
      end
      out << x
    end

    def encode(x)
      out = +''.b
      while x >= 0x80
        out << ((x & 0x7F) | 0x80).chr
        x >>= 7
      end
      out << x.chr
    end
  end

  # A walk over MessagePack bytes that checks, before msgpack-ruby
  # allocates anything, every length claim against the bytes left, the
  # nesting (at most 256 levels) and an estimate of what decoding
  # allocates (docs/FORMAT.md "Limits a reader enforces"). msgpack-ruby
  # preallocates an array of the claimed count: the 5-byte array32 bomb
  # ends the process with NoMemoryError without this walk.
  module MsgpackCheck
    MAX_DEPTH = 256
    MAP_COST = 384
    ENTRY_COST = 64
    VALUE_COST = 32

    module_function

    # The allocation bound for n stored bytes (Go's codec.AllocBound).
    def alloc_bound(n)
      64 * n + (1 << 20)
    end

    # Raises MalformedError(:bomb / :deserialize) unless b holds exactly one
    # well-formed value within the bounds.
    def check(b, stored_len = b.bytesize)
      n = b.bytesize
      bound = alloc_bound([n, stored_len].min)
      cost = 0
      i = 0
      # pending: a stack of counts of values still to read per open container
      stack = [1]
      while (top = stack.length.positive? ? stack[-1] : nil)
        if top.zero?
          stack.pop
          next
        end
        stack[-1] = top - 1
        raise MalformedError.new(:deserialize, 'msgpack: value cut short') if i >= n

        c = b.getbyte(i)
        i += 1
        cost += VALUE_COST
        count = nil
        skip = 0
        if c <= 0x7f || c >= 0xe0
          # fixint
        elsif c <= 0x8f
          count = (c & 0x0f) * 2
          cost += MAP_COST + (c & 0x0f) * ENTRY_COST
        elsif c <= 0x9f
          count = c & 0x0f
        elsif c <= 0xbf
          skip = c & 0x1f
        else
          case c
          when 0xc0, 0xc2, 0xc3 then nil
          when 0xc1 then raise MalformedError.new(:deserialize, 'msgpack: byte 0xc1')
          when 0xc4, 0xd9 then skip = len_at(b, i, 1); i += 1
          when 0xc5, 0xda then skip = len_at(b, i, 2); i += 2
          when 0xc6, 0xdb then skip = len_at(b, i, 4); i += 4
          when 0xc7 then skip = len_at(b, i, 1) + 1; i += 1
          when 0xc8 then skip = len_at(b, i, 2) + 1; i += 2
          when 0xc9 then skip = len_at(b, i, 4) + 1; i += 4
          when 0xca then skip = 4
          when 0xcb then skip = 8
          when 0xcc, 0xd0 then skip = 1
          when 0xcd, 0xd1 then skip = 2
          when 0xce, 0xd2 then skip = 4
          when 0xcf, 0xd3 then skip = 8
          when 0xd4 then skip = 2
          when 0xd5 then skip = 3
          when 0xd6 then skip = 5
          when 0xd7 then skip = 9
          when 0xd8 then skip = 17
          when 0xdc then count = len_at(b, i, 2); i += 2
          when 0xdd then count = len_at(b, i, 4); i += 4
          when 0xde then k = len_at(b, i, 2); i += 2; count = k * 2; cost += MAP_COST + k * ENTRY_COST
          when 0xdf then k = len_at(b, i, 4); i += 4; count = k * 2; cost += MAP_COST + k * ENTRY_COST
          end
        end
        if skip.positive?
          raise MalformedError.new(:bomb, "msgpack: a length of #{skip} with #{n - i} bytes left") if skip > n - i

          cost += skip
          i += skip
        end
        if count
          raise MalformedError.new(:bomb, "msgpack: #{count} elements claimed with #{n - i} bytes left") if count > n - i

          cost += count * VALUE_COST
          if count.positive?
            raise MalformedError.new(:bomb, "msgpack: nested deeper than #{MAX_DEPTH}") if stack.length > MAX_DEPTH

            stack << count
          end
        end
        raise MalformedError.new(:bomb, "msgpack: decoding would allocate over #{bound} bytes") if cost > bound
      end
      raise MalformedError.new(:deserialize, 'msgpack: bytes after the value') if i != n

      true
    end

    def len_at(b, i, w)
      raise MalformedError.new(:deserialize, 'msgpack: length cut short') if i + w > b.bytesize

      case w
      when 1 then b.getbyte(i)
      when 2 then (b.getbyte(i) << 8) | b.getbyte(i + 1)
      else b.byteslice(i, 4).unpack1('N')
      end
    end
  end
end
