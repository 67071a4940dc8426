# frozen_string_literal: true

require 'ffi'

module Kura
  # Bindings to Debian's libsnappy (raw Snappy blocks, compressor id 1) and
  # libzstd (zstd frames, compressor id 2) through ffi: kura writes no
  # compressor of its own.
  module Native
    # libsnappy's C API (snappy-c.h).
    module Snappy
      extend FFI::Library
      ffi_lib ['libsnappy.so.1', 'snappy']
      # status codes: 0 ok, 1 invalid input, 2 buffer too small
      attach_function :snappy_compress, %i[pointer size_t pointer pointer], :int
      attach_function :snappy_uncompress, %i[pointer size_t pointer pointer], :int
      attach_function :snappy_max_compressed_length, [:size_t], :size_t
      attach_function :snappy_uncompressed_length, %i[pointer size_t pointer], :int
    end

    # libzstd's stable API (zstd.h).
    module Zstd
      extend FFI::Library
      ffi_lib ['libzstd.so.1', 'zstd']
      attach_function :ZSTD_compressBound, [:size_t], :size_t
      attach_function :ZSTD_isError, [:size_t], :uint
      attach_function :ZSTD_getErrorName, [:size_t], :string
      attach_function :ZSTD_getFrameContentSize, %i[pointer size_t], :ulong_long
      attach_function :ZSTD_createCCtx, [], :pointer
      attach_function :ZSTD_freeCCtx, [:pointer], :size_t
      attach_function :ZSTD_createDCtx, [], :pointer
      attach_function :ZSTD_freeDCtx, [:pointer], :size_t
      attach_function :ZSTD_compressCCtx, %i[pointer pointer size_t pointer size_t int], :size_t
      attach_function :ZSTD_decompressDCtx, %i[pointer pointer size_t pointer size_t], :size_t
      attach_function :ZSTD_compress_usingDict, %i[pointer pointer size_t pointer size_t pointer size_t int], :size_t
      attach_function :ZSTD_decompress_usingDict, %i[pointer pointer size_t pointer size_t pointer size_t], :size_t
      CONTENTSIZE_UNKNOWN = 0xFFFF_FFFF_FFFF_FFFF
      CONTENTSIZE_ERROR = 0xFFFF_FFFF_FFFF_FFFE
    end

    class NativeError < StandardError; end

    module_function

    # A raw Snappy block of src.
    def snappy_compress(src)
      max = Snappy.snappy_max_compressed_length(src.bytesize)
      out = FFI::MemoryPointer.new(:char, max)
      len = FFI::MemoryPointer.new(:size_t)
      len.write(:size_t, max)
      inp = FFI::MemoryPointer.from_string(src)
      rc = Snappy.snappy_compress(inp, src.bytesize, out, len)
      raise NativeError, "snappy_compress: status #{rc}" unless rc.zero?

      out.read_bytes(len.read(:size_t))
    end

    # The length a Snappy block claims, or nil when its prefix is not a varint.
    def snappy_claimed_length(src)
      return nil if src.empty?

      inp = FFI::MemoryPointer.from_string(src)
      len = FFI::MemoryPointer.new(:size_t)
      rc = Snappy.snappy_uncompressed_length(inp, src.bytesize, len)
      rc.zero? ? len.read(:size_t) : nil
    end

    # Decodes a Snappy block into exactly n bytes; nil when it is not a
    # valid block of that length.
    def snappy_uncompress(src, n)
      return nil if src.empty?

      inp = FFI::MemoryPointer.from_string(src)
      out = FFI::MemoryPointer.new(:char, [n, 1].max)
      len = FFI::MemoryPointer.new(:size_t)
      len.write(:size_t, n)
      rc = Snappy.snappy_uncompress(inp, src.bytesize, out, len)
      return nil unless rc.zero? && len.read(:size_t) == n

      out.read_bytes(n)
    end

    def cctx
      Thread.current[:kura_zstd_cctx] ||= begin
        c = Zstd.ZSTD_createCCtx
        ObjectSpace.define_finalizer(Thread.current, Native.method(:free_cctx_proc).call(c.address))
        c
      end
    end

    def dctx
      Thread.current[:kura_zstd_dctx] ||= begin
        d = Zstd.ZSTD_createDCtx
        ObjectSpace.define_finalizer(Thread.current, Native.method(:free_dctx_proc).call(d.address))
        d
      end
    end

    def free_cctx_proc(addr)
      proc { Zstd.ZSTD_freeCCtx(FFI::Pointer.new(addr)) }
    end

    def free_dctx_proc(addr)
      proc { Zstd.ZSTD_freeDCtx(FFI::Pointer.new(addr)) }
    end

    # One zstd frame of src (content size written, no checksum).
    def zstd_compress(src, level = 3, dict = nil)
      cap = Zstd.ZSTD_compressBound(src.bytesize)
      out = FFI::MemoryPointer.new(:char, cap)
      inp = FFI::MemoryPointer.from_string(src)
      rc = if dict
             dp = FFI::MemoryPointer.from_string(dict)
             Zstd.ZSTD_compress_usingDict(cctx, out, cap, inp, src.bytesize, dp, dict.bytesize, level)
           else
             Zstd.ZSTD_compressCCtx(cctx, out, cap, inp, src.bytesize, level)
           end
      raise NativeError, "zstd: #{Zstd.ZSTD_getErrorName(rc)}" unless Zstd.ZSTD_isError(rc).zero?

      out.read_bytes(rc)
    end

    ZDICT_MAGIC = "\x37\xA4\x30\xEC".b.freeze
    ZSTD_MAGIC = "\x28\xB5\x2F\xFD".b.freeze

    # A frame that names a dictionary id, to be read with a raw-content
    # dictionary (whose id is 0 to libzstd): the same frame without the id.
    # Go's decoder does not compare the ids; libzstd refuses the mismatch.
    def strip_dict_id(src)
      return src if src.bytesize < 6 || src.byteslice(0, 4) != ZSTD_MAGIC

      fhd = src.getbyte(4)
      flag = fhd & 3
      return src if flag.zero?

      skip = fhd & 0x20 != 0 ? 0 : 1 # window descriptor unless single segment
      idlen = [0, 1, 2, 4][flag]
      at = 5 + skip
      return src if src.bytesize < at + idlen

      out = src.byteslice(0, 4).b
      out << (fhd & ~3).chr
      out << src.byteslice(5, skip) << src.byteslice(at + idlen, src.bytesize - at - idlen)
    end

    # The content size a zstd frame names: an Integer, :unknown, or nil
    # when src is not a frame.
    def zstd_content_size(src)
      inp = FFI::MemoryPointer.from_string(src)
      n = Zstd.ZSTD_getFrameContentSize(inp, src.bytesize)
      return :unknown if n == Zstd::CONTENTSIZE_UNKNOWN
      return nil if n == Zstd::CONTENTSIZE_ERROR

      n
    end

    # Decodes zstd frame(s) into exactly n bytes (never more); nil when
    # the data is not valid zstd or yields another length.
    def zstd_decompress(src, n, dict = nil)
      src = strip_dict_id(src) if dict && dict.byteslice(0, 4) != ZDICT_MAGIC
      inp = FFI::MemoryPointer.from_string(src)
      out = FFI::MemoryPointer.new(:char, [n, 1].max)
      rc = if dict
             dp = FFI::MemoryPointer.from_string(dict)
             Zstd.ZSTD_decompress_usingDict(dctx, out, n, inp, src.bytesize, dp, dict.bytesize)
           else
             Zstd.ZSTD_decompressDCtx(dctx, out, n, inp, src.bytesize)
           end
      return nil unless Zstd.ZSTD_isError(rc).zero? && rc == n

      out.read_bytes(n)
    end
  end
end
