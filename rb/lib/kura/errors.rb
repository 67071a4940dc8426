# frozen_string_literal: true

module Kura
  # Every error kura raises.
  class Error < StandardError; end

  # Bytes no reader can use (docs/FORMAT.md "Decoding rules"): a miss that
  # may be overwritten. #code is the Go sentinel's name in snake case
  # (:truncated, :corrupt, :not_kura, :unknown_serializer,
  # :unknown_compressor, :unknown_dictionary, :too_large, :bomb,
  # :deserialize; :dictionary_mismatch matches :unknown_dictionary).
  class MalformedError < Error
    attr_reader :code
    # For :unknown_dictionary: the id the value names and its digest (or nil).
    attr_accessor :dict, :digest

    def initialize(code, msg)
      @code = code
      super("kura: #{msg} (#{code})")
    end
  end

  # An entry a newer writer wrote (a newer version, an unknown kind or an
  # unknown critical field): a miss this reader must not overwrite.
  class NotUnderstoodError < Error
    attr_reader :code

    def initialize(code, msg)
      @code = code
      super("kura: not understood: #{msg}")
    end
  end

  # A value the cache refuses to write (over max_value_size, or not encodable).
  class ValueTooLargeError < Error; end

  # A store operation failed (connection, protocol, timeout); carries the node.
  class StoreError < Error
    attr_reader :node

    def initialize(node, msg)
      @node = node
      super("kura: #{node}: #{msg}")
    end
  end
end
