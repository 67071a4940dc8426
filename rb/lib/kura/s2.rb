# frozen_string_literal: true

module Kura
  # A decoder of S2 blocks with an S2 dictionary (compressor id 3,
  # `s2-dict`), written from docs/FORMAT.md and S2's block format: no Debian
  # library reads S2's dictionaries. It trusts no byte: every length and
  # offset is checked, and it allocates only the output the envelope sized.
  module S2
    MIN_DICT = 16
    MAX_DICT = 65_536
    MAX_DICT_SRC_OFFSET = 65_535

    class Corrupt < StandardError; end

    Dict = Struct.new(:content, :repeat)

    module_function

    # Parses a dictionary in S2's form (uvarint repeat offset, then 16 B to
    # 64 KiB of content); nil for bytes that are not one.
    def parse_dict(b)
      b = b.b
      repeat, i = Kura::Varint.read(b, 0, b.bytesize)
      return nil if repeat.nil?

      content = b.byteslice(i, b.bytesize - i)
      return nil if content.bytesize < MIN_DICT || content.bytesize > MAX_DICT || repeat > content.bytesize

      Dict.new(content, repeat)
    rescue Kura::MalformedError
      nil
    end

    # Decodes src into exactly raw_len bytes, copies reaching into dict.
    def decode(src, raw_len, dict)
      sl = src.bytesize
      len, s = Kura::Varint.read(src, 0, sl)
      raise Corrupt, 'length prefix' if len.nil? || s > 5 || len > 0xFFFF_FFFF
      raise Corrupt, "block claims #{len} bytes, header #{raw_len}" if len != raw_len

      dst = String.new(capacity: raw_len, encoding: Encoding::BINARY)
      dc = dict&.content
      dl = dc ? dc.bytesize : 0
      offset = dict ? dl - dict.repeat : 0
      d = 0
      while s < sl
        tag = src.getbyte(s)
        case tag & 3
        when 0
          x = tag >> 2
          if x < 60
            s += 1
          else
            extra = x - 59
            raise Corrupt, 'literal length' if s + 1 + extra > sl

            x = 0
            extra.times { |k| x |= src.getbyte(s + 1 + k) << (8 * k) }
            s += 1 + extra
          end
          length = x + 1
          raise Corrupt, 'literal past the end' if length > raw_len - d || length > sl - s

          dst << src.byteslice(s, length)
          d += length
          s += length
          next
        when 1
          raise Corrupt, 'copy1 cut short' if s + 2 > sl

          toffset = ((tag & 0xe0) << 3) | src.getbyte(s + 1)
          length = (tag >> 2) & 7
          s += 2
          if toffset.zero?
            case length
            when 5
              raise Corrupt, 'repeat cut short' if s + 1 > sl

              length = src.getbyte(s) + 4
              s += 1
            when 6
              raise Corrupt, 'repeat cut short' if s + 2 > sl

              length = (src.getbyte(s) | (src.getbyte(s + 1) << 8)) + 256
              s += 2
            when 7
              raise Corrupt, 'repeat cut short' if s + 3 > sl

              length = (src.getbyte(s) | (src.getbyte(s + 1) << 8) | (src.getbyte(s + 2) << 16)) + 65_536
              s += 3
            end
          else
            offset = toffset
          end
          length += 4
        when 2
          raise Corrupt, 'copy2 cut short' if s + 3 > sl

          offset = src.getbyte(s + 1) | (src.getbyte(s + 2) << 8)
          length = 1 + (tag >> 2)
          s += 3
        else
          raise Corrupt, 'copy4 cut short' if s + 5 > sl

          offset = src.byteslice(s + 1, 4).unpack1('V')
          length = 1 + (tag >> 2)
          s += 5
        end
        raise Corrupt, 'copy offset or length' if offset <= 0 || length > raw_len - d

        if d < offset
          raise Corrupt, 'copy before the start' unless dc
          raise Corrupt, 'dictionary copy too far in' if d > MAX_DICT_SRC_OFFSET

          start = dl - offset + d
          raise Corrupt, 'dictionary copy out of range' if start.negative? || start + length > dl

          dst << dc.byteslice(start, length)
        elsif offset >= length
          dst << dst.byteslice(d - offset, length)
        else
          from = d - offset
          stop = d + length
          while dst.bytesize < stop
            n = [stop - dst.bytesize, dst.bytesize - from].min
            dst << dst.byteslice(from, n)
          end
        end
        d += length
      end
      raise Corrupt, "block produced #{d} of #{raw_len} bytes" if d != raw_len

      dst
    end
  end
end
